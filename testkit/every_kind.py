"""One object of every built-in kind the loop lists (engine.reading.objects), with the fields the model reads: the
protobuf tests read them both ways (tests/test_wire.py through the codec, tests/e2e/test_wire_e2e.py through a real
apiserver)."""

from __future__ import annotations

NS = "wire"
OBJECTS = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}, labels: {{team: a}}}}
---
apiVersion: v1
kind: Node
metadata: {{name: wire-node, labels: {{kubernetes.io/hostname: wire-node, topology.kubernetes.io/zone: z1, gpu: "yes"}}}}
spec:
  taints: [{{key: dedicated, value: gpu, effect: NoSchedule}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: wire-high}}
value: 1000
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: wire-zero}}
value: 0
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: wire-local}}
provisioner: example.com/local
volumeBindingMode: WaitForFirstConsumer
allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [z1]}}]}}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {{name: wire-pv}}
spec:
  capacity: {{storage: 10Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  hostPath: {{path: /tmp/wire}}
  nodeAffinity:
    required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In,
                                                         values: [wire-node]}}]}}]}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: static, namespace: {NS}}}
spec: {{accessModes: [ReadWriteOnce], storageClassName: "", resources: {{requests: {{storage: 1Gi}}}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: dynamic, namespace: {NS}}}
spec: {{accessModes: [ReadWriteOnce], storageClassName: wire-local, resources: {{requests: {{storage: 2Gi}}}}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {{name: wire.csi.example.com}}
spec: {{attachRequired: false, storageCapacity: true}}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {{name: wire-node}}
spec: {{drivers: [{{name: wire.csi.example.com, nodeID: wire-node, allocatable: {{count: 3}},
                   topologyKeys: [topology.kubernetes.io/zone]}}]}}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {{name: wire-capacity, namespace: {NS}}}
storageClassName: wire-local
capacity: 5Gi
nodeTopology: {{matchLabels: {{topology.kubernetes.io/zone: z1}}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: wire-budget, namespace: {NS}}}
spec: {{minAvailable: "50%", selector: {{matchLabels: {{app: web}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: web, namespace: {NS}}}
spec: {{selector: {{app: web}}, ports: [{{port: 80, targetPort: http}}]}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {{name: web, namespace: {NS}}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: web}}}}
  template: {{metadata: {{labels: {{app: web}}}}, spec: {{containers: [{{name: c, image: x}}]}}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: {NS}}}
spec:
  replicas: 0
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template: {{metadata: {{labels: {{app: db}}}}, spec: {{containers: [{{name: c, image: x}}]}}}}
---
apiVersion: v1
kind: ReplicationController
metadata: {{name: old, namespace: {NS}}}
spec:
  replicas: 0
  selector: {{app: old}}
  template: {{metadata: {{labels: {{app: old}}}}, spec: {{containers: [{{name: c, image: x}}]}}}}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: train, namespace: {NS}}}
spec:
  suspend: true
  parallelism: 2
  completions: 2
  template: {{metadata: {{labels: {{job: train}}}}, spec: {{restartPolicy: Never, containers: [{{name: c, image: x}}]}}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: wire-gpu}}
spec: {{selectors: [{{cel: {{expression: 'device.driver == "gpu.example.com"'}}}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: wire-node-gpus}}
spec:
  driver: gpu.example.com
  nodeName: wire-node
  pool: {{name: wire-node, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    attributes: {{model: {{string: a100}}, index: {{int: 0}}, fast: {{bool: true}}}}
    capacity: {{memory: {{value: 40Gi}}}}
  - name: gpu-1
    attributes: {{model: {{string: a100}}, index: {{int: 1}}}}
    capacity: {{memory: {{value: 40Gi}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: one-gpu, namespace: {NS}}}
spec: {{spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: wire-gpu}}}}]}}}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: two-gpus, namespace: {NS}}}
spec:
  devices:
    requests: [{{name: gpus, exactly: {{deviceClassName: wire-gpu, allocationMode: ExactCount, count: 2,
                                          selectors: [{{cel: {{expression:
                                            'device.attributes["gpu.example.com"].model == "a100"'}}}}]}}}}]
    config: [{{opaque: {{driver: gpu.example.com, parameters: {{sharing: {{strategy: TimeSlicing}}}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: rich, namespace: {NS}, labels: {{app: web}}}}
spec:
  schedulerName: policy-scheduler
  priorityClassName: wire-high
  nodeSelector: {{gpu: "yes"}}
  tolerations:
  - {{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}}
  - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 30}}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [z1]}}]}}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - {{weight: 5, preference: {{matchExpressions: [{{key: gpu, operator: Exists}}]}}}}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {{labelSelector: {{matchLabels: {{app: web}}}}, topologyKey: kubernetes.io/hostname}}
      preferredDuringSchedulingIgnoredDuringExecution:
      - {{weight: 3, podAffinityTerm: {{labelSelector: {{matchExpressions: [{{key: app, operator: In, values: [db]}}]}},
                                     topologyKey: topology.kubernetes.io/zone, namespaceSelector: {{}}}}}}
  topologySpreadConstraints:
  - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
     labelSelector: {{matchLabels: {{app: web}}}}, minDomains: 1, matchLabelKeys: [pod-template-hash]}}
  containers:
  - name: c
    image: x
    ports: [{{containerPort: 8080, hostPort: 8080, protocol: TCP}}]
    resources:
      requests: {{cpu: 250m, memory: 64Mi, example.com/widget: "1"}}
      limits: {{cpu: "1", memory: 128Mi, example.com/widget: "1"}}
      claims: [{{name: gpu}}]
  initContainers:
  - {{name: init, image: x, resources: {{requests: {{cpu: "2"}}}}}}
  - {{name: sidecar, image: x, restartPolicy: Always, resources: {{requests: {{memory: 1Gi}}}}}}
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: one-gpu}}]
  volumes:
  - {{name: data, persistentVolumeClaim: {{claimName: static}}}}
  - {{name: scratch, ephemeral: {{volumeClaimTemplate: {{spec: {{accessModes: [ReadWriteOnce], storageClassName: wire-local,
                                                              resources: {{requests: {{storage: 1Gi}}}}}}}}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: bound, namespace: {NS}, labels: {{app: db}}}}
spec:
  priorityClassName: wire-zero
  nodeName: wire-node
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: gated, namespace: {NS}}}
spec:
  schedulingGates: [{{name: example.com/wait}}]
  containers: [{{name: c, image: x}}]
"""
KINDS = ("Namespace", "Node", "PriorityClass", "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSIDriver",
         "CSINode", "CSIStorageCapacity", "PodDisruptionBudget", "Service", "ReplicaSet", "StatefulSet",
         "ReplicationController", "Job", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim", "Pod")
