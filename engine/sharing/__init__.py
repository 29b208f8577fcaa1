"""GPU sharing as the FGD paper models it (issue 52; Weng et al., "Beware of Fragmentation", USENIX ATC '23): nodes
with CPU, memory and GPUs whose capacity is counted in milli-GPUs, tasks asking for whole GPUs or a share of one
(`gpus`), the paper's fragmentation measure (`fragmentation`) and the one-task-at-a-time placement policies it is
compared against, plus kube-scheduler's default scoring for such pods (`policies`).

Pure and small on purpose: nothing here reads files, Kubernetes objects or the planner, so `simulate` (or a sweep
worker) can run a policy over a trace without the rest of the engine.
"""
