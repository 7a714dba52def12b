{{/*
Names, labels and the pieces every dagwright pod shares. The Deployment itself is
_deployment.tpl's; workers.yaml turns the `workers:` map into one per entry.
*/}}

{{/* The namespace every object goes in. */}}
{{- define "dagwright.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end }}

{{/* Labels on every object: what Helm and `kubectl get -l` group them by. */}}
{{- define "dagwright.commonLabels" -}}
{{ include "dagwright.podLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The part of them pods carry too: not the chart's version, which would restart
every pod at a chart upgrade that changes nothing of theirs. */}}
{{- define "dagwright.podLabels" -}}
app.kubernetes.io/part-of: dagwright
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The Secret the pods read, by reference: yours (secret.existingSecret) or the chart's. */}}
{{- define "dagwright.secretName" -}}
{{- .Values.secret.existingSecret | default "dagwright-secrets" -}}
{{- end }}

{{- define "dagwright.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
A worker type's name in Kubernetes names and label values: function queues' ':' and
'_' (which neither allows) become '-'. Fails on a name that still is not a DNS label.
*/}}
{{- define "dagwright.workerSlug" -}}
{{- $slug := . | replace ":" "-" | replace "_" "-" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $slug) -}}
{{- fail (printf "workers.%s: a worker type's name must be lowercase letters, digits, '-', '_' and one ':' (function:<queue>)" .) -}}
{{- end -}}
{{- if gt (len $slug) 47 -}}
{{- fail (printf "workers.%s: at most 47 characters (Kubernetes names the pods after it)" .) -}}
{{- end -}}
{{- $slug -}}
{{- end }}

{{/* DAGWRIGHT_REDIS_URL, built in the pod from the Secret's password (never in the spec);
with broker.kind rabbitmq, DAGWRIGHT_BROKER_URL from the Secret's broker-url. */}}
{{- define "dagwright.redisEnv" -}}
- name: VALKEY_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "dagwright.secretName" . }}, key: redis-password}}
- name: DAGWRIGHT_REDIS_URL
  {{- with .Values.redis }}
  value: {{ .url | default (printf "%s://:$(VALKEY_PASSWORD)@%s:%v/%v" .scheme .host .port .database) | quote }}
  {{- end }}
{{- if eq .Values.broker.kind "rabbitmq" }}
- name: DAGWRIGHT_BROKER_URL
  valueFrom: {secretKeyRef: {name: {{ include "dagwright.secretName" . }}, key: broker-url}}
{{- end }}
{{- end }}

{{/* The API key, for what calls the LLM only (the planner, the agent types). */}}
{{- define "dagwright.llmEnv" -}}
- name: ANTHROPIC_API_KEY
  valueFrom: {secretKeyRef: {name: {{ include "dagwright.secretName" . }}, key: anthropic-api-key, optional: true}}
{{- end }}

{{/*
A container's hardening: no privilege escalation, read-only root, no capabilities. A
sandbox pod's bwrap needs seccomp and AppArmor Unconfined and an unmasked /proc
(values.yaml, workerDefaults.sandbox, says why).
*/}}
{{- define "dagwright.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- if . }}
seccompProfile: {type: Unconfined}
appArmorProfile: {type: Unconfined}
procMount: Unmasked
{{- else }}
seccompProfile: {type: RuntimeDefault}
{{- end }}
{{- end }}
