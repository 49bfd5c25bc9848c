{{/* The kubelet's root without a trailing slash. */}}
{{- define "csi-registrar.kubeletDir" -}}
{{- required "kubeletDir: the kubelet's root directory, e.g. /var/lib/kubelet" .Values.kubeletDir | trimSuffix "/" -}}
{{- end -}}

{{/* The image's tag: image.tag, else the chart's appVersion. */}}
{{- define "csi-registrar.tag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{/* The recommended labels every object carries (component aside). */}}
{{- define "csi-registrar.labels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "csi-registrar.tag" . | quote }}
app.kubernetes.io/part-of: csi-registrar
{{- end -}}
