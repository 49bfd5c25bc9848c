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

{{/* The CSI driver's name. */}}
{{- define "csi-registrar.driverName" -}}
{{- required "driverName: the CSI driver's name, e.g. stub.csi.example.com" .Values.driverName -}}
{{- end -}}

{{/* The driver's CSI socket file in the socket directory: with the
handover, each pod's own, named by its UID (POD_UID, from the
downward API; the kubelet expands $(POD_UID) in args and env values). */}}
{{- define "csi-registrar.socketFile" -}}
{{- if include "csi-registrar.rolling" . -}}$(POD_UID).sock{{- else -}}csi.sock{{- end -}}
{{- end -}}

{{/* The driver's socket directory under <kubeletDir>/plugins/: the driver
name, unless <kubeletDir>/plugins/<name>/<socket file> would exceed the 107
bytes of a unix socket address (pod UIDs are 36 characters: with the
handover a 63-character name at the default root makes 130 bytes; the
handover's other files there, csi-endpoint.sock and
.csi-registrar-handover.sock, are shorter).
Then the first 16 hex digits of the name's SHA-256 (fewer if only fewer fit):
`printf %s <name> | sha256sum | cut -c1-16` on a node finds it. */}}
{{- define "csi-registrar.socketDir" -}}
{{- $root := include "csi-registrar.kubeletDir" . -}}
{{- $name := include "csi-registrar.driverName" . -}}
{{- $file := ternary 41 (len "csi.sock") (eq (include "csi-registrar.rolling" .) "true") -}}
{{- $room := sub 107 (add (len $root) (len "/plugins/") 1 $file) -}}
{{- if le (len $name) $room -}}
{{- $name -}}
{{- else if lt $room 8 -}}
{{- fail (printf "kubeletDir %s: the driver's socket path %s/plugins/<directory>/%s leaves %d bytes for the directory, fewer than 8: a unix socket path holds at most 107 bytes" $root $root (include "csi-registrar.socketFile" .) $room) -}}
{{- else -}}
{{- printf "%s" $name | sha256sum | trunc (min 16 $room | int) -}}
{{- end -}}
{{- end -}}

{{/* Fails when the registration socket would not fit a unix socket address
where the kubelet dials it: <kubeletDir>/plugins_registry/<driverName>-reg.sock
(with the handover or without it: the same socket, named as upstream names
it). The registrar sees the directory only as mounted in its container and
cannot check this. */}}
{{- define "csi-registrar.checkRegistrationPath" -}}
{{- $root := include "csi-registrar.kubeletDir" . -}}
{{- $name := include "csi-registrar.driverName" . -}}
{{- $n := add (len $root) (len "/plugins_registry/") (len $name) (len "-reg.sock") -}}
{{- if gt $n 107 -}}
{{- fail (printf "kubeletDir %s, driverName %s: the kubelet would dial the registration socket at %s/plugins_registry/%s-reg.sock, %d bytes; a unix socket path holds at most 107: %d too many, shorten kubeletDir or driverName" $root $name $root $name $n (sub $n 107)) -}}
{{- end -}}
{{- end -}}

{{/* Whether the rolling update (the handover) is on: "true" or "".
rollingUpdate.enabled true or false decides; an explicit value, so that a
helm upgrade never changes it by itself (an earlier chart's auto followed the
API server's version, which kubelets may lag). */}}
{{- define "csi-registrar.rolling" -}}
{{- $v := toString .Values.rollingUpdate.enabled -}}
{{- if eq $v "true" -}}
true
{{- else if eq $v "auto" -}}
{{- fail "rollingUpdate.enabled: auto is no longer a choice (it followed the API server's version, which kubelets may lag); set true (the handover, the default) or false (pods replaced one at a time)" -}}
{{- else if ne $v "false" -}}
{{- fail (printf "rollingUpdate.enabled: %q is not one of true, false; use true (the handover, the default) or false (pods replaced one at a time)" $v) -}}
{{- end -}}
{{- end -}}

{{/* The Node condition and the startup taint of nodeReadiness. */}}
{{- define "csi-registrar.nodeCondition" -}}
{{- .Values.nodeReadiness.condition | default (printf "%s/NodePluginRegistered" (include "csi-registrar.driverName" .)) -}}
{{- end -}}
{{- define "csi-registrar.startupTaint" -}}
{{- .Values.nodeReadiness.startupTaint | default (printf "%s/agent-not-ready" (include "csi-registrar.driverName" .)) -}}
{{- end -}}
