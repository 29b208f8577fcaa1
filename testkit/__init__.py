"""The test kit: what the tests (tests/, tests/e2e/) and the benchmarks (bench/) share.

    manifests     Node, Pod, PodGroup, ... manifests as plain dicts (one builder per kind)
    quantity      Kubernetes quantities as integers (kubernetes.utils.parse_quantity, not the engine's parser)
    checker       the independent plan validator, a test oracle written from kube-scheduler's semantics
    controlplane  a real etcd + kube-apiserver on loopback (the e2e tests' control plane), processes, HTTP
    scheduling    raw-JSON API calls (Kube) and `policy-scheduler run` processes (Schedulers)
    metrics       reading a scheduler's Prometheus /metrics text

It is not part of the product (pyproject.toml does not ship it) and imports nothing from `engine`: an oracle
must not share the code it judges (`.importlinter` holds that). Tests find it through pytest's `pythonpath`;
bench/ scripts put the repository root on `sys.path`. Neither tests/ nor bench/ is imported from here.
"""
