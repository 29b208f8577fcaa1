"""policy-scheduler: a declarative, policy-driven batch scheduler for Kubernetes.

Data flows one way: load → model → compile → solve → plan → (print | bind).
"""

__version__ = "0.1.0"
