"""The in-cluster scheduler loop (`policy-scheduler run`): watches → store → queue → cycle → binder.

Only `api` imports the Kubernetes client; everything else codes against `ports.ClusterAPI`.
"""
