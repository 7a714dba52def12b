{{/*
The one Deployment of the chart: every dagwright process (orchestrator, reconciler, beat,
server, Flower, metrics, each worker type) is this template with its own arguments, so
the hardening is written once: non-root uid, read-only root on an emptyDir /tmp, no
capabilities, the settings ConfigMap, DAGWRIGHT_REDIS_URL from the Secret, and rolling
updates that never take a pod down before its replacement is up (maxUnavailable: 0).

Called with a dict:
  root           the chart's context ($)
  name           the Deployment's name
  labels         labels of the Deployment and its pods (a dict)
  selector       the part of them that selects its pods (a dict)
  annotations    of the Deployment (a dict, may be empty)
  container      the container's name
  args           `dagwright <args>` (a list)
  replicas       a number, or nil: none (KEDA's HPA owns the field)
  uid            runAsUser and runAsGroup
  llm            true: ANTHROPIC_API_KEY
  sandbox        true: what bwrap needs (a user namespace, Unconfined, unmasked /proc)
  grace          terminationGracePeriodSeconds, or nil: Kubernetes' default
  resources      the container's resources (a dict)
  ports, readinessProbe, livenessProbe, extraEnv, nodeSelector, tolerations,
  runtimeClassName   optional, as in a pod spec
*/}}
{{- define "dagwright.deployment" -}}
{{- $root := .root -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ include "dagwright.namespace" $root }}
  labels:
    {{- include "dagwright.commonLabels" $root | nindent 4 }}
    {{- toYaml .labels | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- if kindIs "invalid" .replicas }}
  # No `replicas`: KEDA's HPA sets them from the length of the queue (its ScaledObject);
  # a value here would reset them at every upgrade. A new Deployment starts with 1.
  {{- else }}
  replicas: {{ .replicas }}
  {{- end }}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  selector:
    matchLabels:
      {{- toYaml .selector | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "dagwright.podLabels" $root | nindent 8 }}
        {{- toYaml .labels | nindent 8 }}
    spec:
      {{- if .sandbox }}
      hostUsers: false  # its own user namespace, for procMount: Unmasked
      {{- end }}
      securityContext: {runAsNonRoot: true, runAsUser: {{ .uid }}, runAsGroup: {{ .uid }}}
      {{- if not (kindIs "invalid" .grace) }}
      terminationGracePeriodSeconds: {{ .grace }}
      {{- end }}
      {{- with .runtimeClassName }}
      runtimeClassName: {{ . }}
      {{- end }}
      {{- with .nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .container }}
          image: {{ include "dagwright.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: {{ toJson .args }}
          envFrom: [{configMapRef: {name: dagwright-config}}]
          env:
            {{- include "dagwright.redisEnv" $root | nindent 12 }}
            {{- if .llm }}
            {{- include "dagwright.llmEnv" $root | nindent 12 }}
            {{- end }}
            {{- if .sandbox }}
            - name: DAGWRIGHT_SANDBOX_BACKEND
              value: bubblewrap
            {{- end }}
            {{- with .extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with .ports }}
          ports:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .readinessProbe }}
          readinessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- with .livenessProbe }}
          livenessProbe:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          resources:
            {{- toYaml .resources | nindent 12 }}
          securityContext:
            {{- include "dagwright.containerSecurity" .sandbox | nindent 12 }}
          volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
{{- end }}
