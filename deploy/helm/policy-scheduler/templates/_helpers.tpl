{{/* The name of every object of the release (cluster-scoped ones too, so two releases do not collide). */}}
{{- define "policy-scheduler.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "policy-scheduler.selector" -}}
app.kubernetes.io/name: policy-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "policy-scheduler.labels" -}}
{{ include "policy-scheduler.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The ConfigMap a profile reads: the chart's of its `policies`, your `existingConfigMap`, or else
NAME-policies (NAME: the profile's), read once it exists (`policy-scheduler configmap DIR -n NAMESPACE | kubectl apply
-f -` writes policy-scheduler-policies, the default profile's). Both a ConfigMap of your own and policies here would
leave the policies unread: refused. */}}
{{- define "policy-scheduler.configmap" -}}
{{- if and .profile.existingConfigMap .profile.policies -}}
{{- fail (printf "profiles: profile %q sets both existingConfigMap and policies; the scheduler would read ConfigMap %q only and ignore the policies written here: keep one of the two (put the policies in your ConfigMap, or drop existingConfigMap)" .profile.name .profile.existingConfigMap) -}}
{{- end -}}
{{- if .profile.existingConfigMap -}}
{{ .profile.existingConfigMap }}
{{- else if .profile.policies -}}
{{ include "policy-scheduler.fullname" .root }}-{{ .profile.name }}-policies
{{- else -}}
{{ .profile.name }}-policies
{{- end -}}
{{- end -}}

{{/* `--profile`'s value: NAME=NAMESPACE/CONFIGMAP, with ",optional" for NAME-policies (pod specs only until it
exists; the ConfigMaps the chart makes or you name are required: nothing is scheduled until they load). */}}
{{- define "policy-scheduler.profile" -}}
{{ .profile.name }}={{ .root.Release.Namespace }}/{{ include "policy-scheduler.configmap" . }}{{ if not (or .profile.existingConfigMap .profile.policies) }},optional{{ end }}
{{- end -}}

{{/* The image: by digest when image.digest is set (the tag is then only informative), else by tag. */}}
{{- define "policy-scheduler.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The Secret holding the serving certificate (tls.crt, tls.key, ca.crt), or nothing: generated in memory at
start. Both sources at once would leave one unused: refused. */}}
{{- define "policy-scheduler.tlsSecret" -}}
{{- if and .Values.tls.existingSecret .Values.tls.certManager.enabled -}}
{{- fail "tls: set either existingSecret or certManager.enabled, not both: the scheduler serves one certificate" -}}
{{- end -}}
{{- if .Values.tls.existingSecret -}}
{{ .Values.tls.existingSecret }}
{{- else if .Values.tls.certManager.enabled -}}
{{ include "policy-scheduler.fullname" . }}-tls
{{- end -}}
{{- end -}}

{{/* The metrics Service's DNS name, which a certificate from a Secret must hold and the ServiceMonitor checks. */}}
{{- define "policy-scheduler.serviceHost" -}}
{{ include "policy-scheduler.fullname" . }}-metrics.{{ .Release.Namespace }}.svc
{{- end -}}
