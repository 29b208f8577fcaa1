"""The serving side: /metrics and the health paths over HTTPS with Kubernetes' delegated authentication and
authorization (certificates, access, the connection-bounded server, the endpoints), as kube-scheduler serves 10259."""
