package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"gopkg.in/yaml.v3"
)

// The modules whose files the schemas are made from. They are never imported: CI downloads them
// into the module cache with `go mod download` (deploy/README.md), and the tests read them there
// with GOPROXY=off.
const (
	kubernetesModule = "k8s.io/kubernetes@v1.35.4"                                  // api/openapi-spec/swagger.json
	promOpModule     = "github.com/prometheus-operator/prometheus-operator@v0.85.0" // ServiceMonitor CRD
	chartDir         = "helm/ndtrace"
	// kubeVersion is the Kubernetes version charts are rendered and validated for. helm built
	// with `go install` has no release ldflags and would assume v1.20.0 otherwise.
	kubeVersion = "1.35.4"
)

// need reports a missing prerequisite: a failure when CI is set, a skip otherwise.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and a prerequisite is missing: "+format, args...)
	}
	t.Skipf(format, args...)
}

// tool finds a program in ../bin (where the CI set-up installs it), then on PATH.
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := filepath.Abs(filepath.Join("..", "bin", name)); err == nil {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	need(t, "%s not found in ../bin or on PATH (install it with the CI set-up lines of deploy/README.md)", name)
	return ""
}

// moduleDir is where the module cache holds mod (path@version), without touching the network.
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		need(t, "no go command on PATH to locate %s", mod)
	}
	cmd := exec.Command(goCmd, "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside the main module: nothing in go.mod or go.sum changes
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off", "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	if err != nil || info.Dir == "" {
		need(t, "module %s is not in the module cache (%s %v): run `go mod download %s`", mod, info.Error, err, mod)
	}
	return info.Dir
}

var (
	schemaOnce sync.Once
	schemaDir  string
	schemaErr  error
)

// kubeSchemas returns a directory of strict JSON schemas for Kubernetes v1.35 kinds and the
// ServiceMonitor CRD, made once per test binary.
func kubeSchemas(t *testing.T) string {
	t.Helper()
	k8s := moduleDir(t, kubernetesModule)
	promOp := moduleDir(t, promOpModule)
	schemaOnce.Do(func() {
		schemaDir, schemaErr = os.MkdirTemp("", "ndtrace-kube-schemas-")
		if schemaErr != nil {
			return
		}
		var n int
		n, schemaErr = writeKubernetesSchemas(filepath.Join(k8s, "api", "openapi-spec", "swagger.json"), schemaDir)
		if schemaErr == nil && n < 50 {
			schemaErr = fmt.Errorf("only %d kinds in the Kubernetes OpenAPI document", n)
		}
		if schemaErr == nil {
			schemaErr = writeCRDSchemas(filepath.Join(promOp, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"), schemaDir)
		}
	})
	if schemaErr != nil {
		t.Fatalf("making JSON schemas: %v", schemaErr)
	}
	return schemaDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if schemaDir != "" {
		os.RemoveAll(schemaDir)
	}
	os.Exit(code)
}

// run runs a program and returns its stdout; stderr goes into the error.
func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), err
}

// helmEnv keeps helm away from the user's configuration, caches and repositories.
func helmEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}
}

// docs decodes a multi-document YAML stream, dropping empty documents.
func docs(t *testing.T, stream string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(stream))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, stream)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// kubeconform validates manifests strictly against the local schemas and returns its summary.
type kcSummary struct{ Valid, Invalid, Errors, Skipped int }

func kubeconform(t *testing.T, kc, schemas, manifests string) (kcSummary, string, error) {
	t.Helper()
	out, err := run(t, nil, kc,
		"-strict", "-summary", "-output", "json",
		"-kubernetes-version", kubeVersion,
		"-schema-location", filepath.Join(schemas, "{{ .ResourceKind }}{{ .KindSuffix }}.json"),
		manifests)
	var res struct {
		Summary kcSummary `json:"summary"`
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil && err == nil {
		err = fmt.Errorf("kubeconform output: %v\n%s", jerr, out)
	}
	return res.Summary, out, err
}

// chartCase is one set of values the chart is rendered with.
type chartCase struct {
	name   string
	values string
	check  func(t *testing.T, objs map[string]map[string]any)
}

var chartCases = []chartCase{
	{name: "defaults", check: func(t *testing.T, objs map[string]map[string]any) {
		wantKinds(t, objs, "Deployment", "HorizontalPodAutoscaler", "Service", "ServiceAccount")
		dep := objs["Deployment"]
		pod := get(dep, "spec", "template", "spec").(map[string]any)
		c := container(t, dep)
		args := strs(c["args"])
		for _, a := range []string{"--temporal=temporal-frontend.temporal.svc:7233", "--namespace=default", "--queues=trace,io",
			"--trace-concurrency=2", "--io-concurrency=4", "--backend=namespaces", "--metrics-addr=:9090"} {
			if !slices.Contains(args, a) {
				t.Errorf("worker args %v lack %s", args, a)
			}
		}
		if get(dep, "spec", "replicas") != nil {
			t.Error("replicas set although the HPA owns them")
		}
		psc := pod["securityContext"].(map[string]any)
		if psc["runAsNonRoot"] != true || psc["runAsUser"] != 10001 || get(psc, "seccompProfile", "type") != "Unconfined" {
			t.Errorf("pod securityContext: %v", psc)
		}
		sc := c["securityContext"].(map[string]any)
		if sc["allowPrivilegeEscalation"] != false || sc["privileged"] != nil || !slices.Contains(strs(get(sc, "capabilities", "drop")), "ALL") {
			t.Errorf("container securityContext: %v", sc)
		}
		// The strongest configuration by default: a pod user namespace and a /proc items can mount.
		if sc["procMount"] != "Unmasked" || get(dep, "spec", "template", "spec", "hostUsers") != false {
			t.Errorf("procMount %v, hostUsers %v; want Unmasked and false", sc["procMount"], get(dep, "spec", "template", "spec", "hostUsers"))
		}
		if get(c, "readinessProbe", "httpGet", "path") != "/metrics" || get(c, "readinessProbe", "httpGet", "port") != "metrics" {
			t.Errorf("readiness probe: %v", c["readinessProbe"])
		}
		if get(c, "resources", "requests", "cpu") == nil || get(c, "resources", "limits", "memory") == nil {
			t.Errorf("resources: %v", c["resources"])
		}
		if c["env"] != nil || c["envFrom"] != nil {
			t.Errorf("credentials without storage.existingSecret: env %v envFrom %v", c["env"], c["envFrom"])
		}
		hpa := objs["HorizontalPodAutoscaler"]
		if get(hpa, "spec", "scaleTargetRef", "name") != get(dep, "metadata", "name") {
			t.Errorf("HPA targets %v", get(hpa, "spec", "scaleTargetRef"))
		}
		svc := objs["Service"]
		if !sameLabels(get(svc, "spec", "selector"), get(dep, "spec", "selector", "matchLabels")) {
			t.Errorf("Service selector %v is not the Deployment's %v", get(svc, "spec", "selector"), get(dep, "spec", "selector", "matchLabels"))
		}
		if get(pod, "serviceAccountName") != get(objs["ServiceAccount"], "metadata", "name") {
			t.Errorf("serviceAccountName %v", pod["serviceAccountName"])
		}
	}},
	{name: "secret-keys-gcp-everything-on", values: `
temporal: {address: "temporal.example.com:7233", namespace: datasets}
autoscaling: {enabled: false}
replicaCount: 5
worker: {queues: trace, traceConcurrency: 8, timeout: 30s, debug: true, extraArgs: ["--max-events", "200000"]}
storage:
  existingSecret: ndtrace-storage
  optionalKeys: true
  gcpCredentialsKey: sa.json
  env: {AWS_REGION: us-east-1}
metrics: {serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}}
podDisruptionBudget: {enabled: true}
hostUsers: false
extraEnv: [{name: FOO, value: bar}]
extraVolumes: [{name: envs, persistentVolumeClaim: {claimName: python-envs, readOnly: true}}]
extraVolumeMounts: [{name: envs, mountPath: /data/envs, readOnly: true}]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: sandbox, operator: Exists, effect: NoSchedule}]
submit: {enabled: true, out: "s3://b/p?region=us-east-1"}
`, check: func(t *testing.T, objs map[string]map[string]any) {
		wantKinds(t, objs, "Deployment", "Service", "ServiceAccount", "ServiceMonitor", "PodDisruptionBudget", "Job", "ConfigMap")
		if _, ok := objs["HorizontalPodAutoscaler"]; ok {
			t.Error("HPA rendered with autoscaling.enabled false")
		}
		dep := objs["Deployment"]
		if get(dep, "spec", "replicas") != 5 {
			t.Errorf("replicas %v", get(dep, "spec", "replicas"))
		}
		if get(dep, "spec", "template", "spec", "hostUsers") != false {
			t.Error("hostUsers: false not rendered")
		}
		c := container(t, dep)
		args := strs(c["args"])
		for _, a := range []string{"--temporal=temporal.example.com:7233", "--namespace=datasets", "--queues=trace", "--trace-concurrency=8", "--timeout=30s", "--max-events", "200000"} {
			if !slices.Contains(args, a) {
				t.Errorf("worker args %v lack %s", args, a)
			}
		}
		env := map[string]map[string]any{}
		for _, e := range c["env"].([]any) {
			m := e.(map[string]any)
			env[m["name"].(string)] = m
		}
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if get(env[k], "valueFrom", "secretKeyRef", "name") != "ndtrace-storage" || get(env[k], "valueFrom", "secretKeyRef", "optional") != true {
				t.Errorf("%s: %v", k, env[k])
			}
		}
		if get(env["GOOGLE_APPLICATION_CREDENTIALS"], "value") != "/var/run/secrets/ndtrace/gcp/sa.json" ||
			get(env["NDTRACE_LOG"], "value") != "debug" || get(env["AWS_REGION"], "value") != "us-east-1" || get(env["FOO"], "value") != "bar" {
			t.Errorf("env: %v", env)
		}
		mounted := false
		for _, m := range c["volumeMounts"].([]any) {
			if get(m, "mountPath") == "/var/run/secrets/ndtrace/gcp" && get(m, "readOnly") == true {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("GCP credentials not mounted: %v", c["volumeMounts"])
		}
		job := objs["Job"]
		jc := strs(get(job, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["command"])
		if !slices.Equal(jc, []string{"/usr/local/bin/ndtrace", "submit"}) {
			t.Errorf("submit command %v", jc)
		}
		if !strings.Contains(get(objs["ConfigMap"], "data", "spec.yaml").(string), "kind: examples") {
			t.Errorf("spec ConfigMap: %v", objs["ConfigMap"])
		}
		if get(objs["ServiceMonitor"], "metadata", "labels", "release") != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor labels: %v", get(objs["ServiceMonitor"], "metadata", "labels"))
		}
	}},
	{name: "envfrom-secret", values: `
storage: {existingSecret: ndtrace-storage, envFromSecret: true}
autoscaling: {targetMemoryUtilizationPercentage: 80}
`, check: func(t *testing.T, objs map[string]map[string]any) {
		c := container(t, objs["Deployment"])
		if get(c, "envFrom") == nil || get(c["envFrom"].([]any)[0], "secretRef", "name") != "ndtrace-storage" {
			t.Errorf("envFrom: %v", c["envFrom"])
		}
		if c["env"] != nil {
			t.Errorf("env besides envFrom: %v", c["env"])
		}
		if n := len(get(objs["HorizontalPodAutoscaler"], "spec", "metrics").([]any)); n != 2 {
			t.Errorf("HPA metrics: %d, want cpu and memory", n)
		}
	}},
	{name: "no-metrics", values: `
metrics: {enabled: false}
fullnameOverride: tracer
`, check: func(t *testing.T, objs map[string]map[string]any) {
		if _, ok := objs["Service"]; ok {
			t.Error("metrics Service without metrics")
		}
		c := container(t, objs["Deployment"])
		if c["readinessProbe"] != nil || c["ports"] != nil || slices.ContainsFunc(strs(c["args"]), func(a string) bool { return strings.HasPrefix(a, "--metrics-addr") }) {
			t.Errorf("metrics leftovers: %v", c)
		}
		if get(objs["Deployment"], "metadata", "name") != "tracer" {
			t.Errorf("fullnameOverride: %v", get(objs["Deployment"], "metadata", "name"))
		}
	}},
}

// TestChart lints the chart, renders it with each chartCase and validates every manifest
// strictly against the Kubernetes 1.35 schemas.
func TestChart(t *testing.T) {
	helm := tool(t, "helm")
	kc := tool(t, "kubeconform")
	schemas := kubeSchemas(t)
	env := helmEnv(t)
	if _, err := run(t, env, helm, "lint", "--strict", "--kube-version", kubeVersion, chartDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"template", "rel", chartDir, "--namespace", "ndtrace", "--kube-version", kubeVersion}
			if tc.values != "" {
				vf := filepath.Join(dir, "values.yaml")
				if err := os.WriteFile(vf, []byte(tc.values), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--values", vf)
				lint := []string{"lint", "--strict", "--kube-version", kubeVersion, chartDir, "--values", vf}
				if _, err := run(t, env, helm, lint...); err != nil {
					t.Fatal(err)
				}
			}
			// helm template leaves hooks (the submit Job) in its output, so they are checked too.
			out, err := run(t, env, helm, args...)
			if err != nil {
				t.Fatal(err)
			}
			manifests := filepath.Join(dir, "manifests.yaml")
			if err := os.WriteFile(manifests, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			all := docs(t, out)
			sum, kcOut, err := kubeconform(t, kc, schemas, manifests)
			if err != nil || sum.Valid != len(all) || sum.Invalid+sum.Errors+sum.Skipped != 0 {
				t.Fatalf("kubeconform: %+v for %d manifests, %v\n%s\n--- manifests:\n%s", sum, len(all), err, kcOut, out)
			}
			objs := map[string]map[string]any{}
			for _, d := range all {
				k, _ := d["kind"].(string)
				if _, dup := objs[k]; dup {
					t.Errorf("two %s objects", k)
				}
				objs[k] = d
				if get(d, "metadata", "labels", "app.kubernetes.io/instance") != "rel" {
					t.Errorf("%s without the instance label: %v", k, get(d, "metadata", "labels"))
				}
			}
			tc.check(t, objs)
		})
	}
}

// TestChartRejectsBadValues: an empty Temporal address, a misspelt value and a value outside
// its choices (values.schema.json) fail at render time, not in a pod.
func TestChartRejectsBadValues(t *testing.T) {
	helm := tool(t, "helm")
	env := helmEnv(t)
	for set, want := range map[string]string{
		"temporal.address=":         "temporal.address is required",
		"worker.traceConcurency=3":  "traceConcurency",
		"worker.backend=docker":     "backend",
		"worker.traceConcurrency=0": "traceConcurrency",
	} {
		_, err := run(t, env, helm, "template", "rel", chartDir, "--kube-version", kubeVersion, "--set", set)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s: want an error naming %q, got %v", set, want, err)
		}
	}
}

// TestSchemasAreStrict makes sure the generated schemas catch the mistakes they are there for
// (an unknown field, a wrong type, a ServiceMonitor typo), so a pass in TestChart means something.
func TestSchemasAreStrict(t *testing.T) {
	kc := tool(t, "kubeconform")
	schemas := kubeSchemas(t)
	cases := map[string]string{
		"unknown field": `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: i, securityContex: {}}]
`,
		"wrong type": `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: x}
spec: {scaleTargetRef: {kind: Deployment, name: x}, maxReplicas: "ten"}
`,
		"servicemonitor typo": `apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: x}
spec: {selector: {}, endpoint: [{port: metrics}]}
`,
	}
	valid := `apiVersion: v1
kind: Service
metadata: {name: x}
spec: {ports: [{port: 9090, targetPort: metrics}], selector: {a: b}}
---
apiVersion: v1
kind: Pod
metadata: {name: x}
spec:
  containers:
    - name: c
      image: i
      resources: {requests: {cpu: 1, memory: 1Gi}}
      ports: [{containerPort: 9090}]
`
	dir := t.TempDir()
	f := filepath.Join(dir, "valid.yaml")
	os.WriteFile(f, []byte(valid), 0o644)
	if sum, out, err := kubeconform(t, kc, schemas, f); err != nil || sum.Valid != 2 {
		t.Errorf("valid manifests: %+v %v\n%s", sum, err, out)
	}
	for name, m := range cases {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		os.WriteFile(f, []byte(m), 0o644)
		sum, out, err := kubeconform(t, kc, schemas, f)
		if err == nil || sum.Invalid != 1 {
			t.Errorf("%s: want one invalid resource, got %+v, err %v\n%s", name, sum, err, out)
		}
	}
}

// TestWorkerFlags checks that every flag the chart and compose.yaml give `ndtrace worker` is one
// the binary (../bin/ndtrace, built by the README's set-up command) knows.
func TestWorkerFlags(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "bin", "ndtrace"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		need(t, "%s not built (README set-up command)", bin)
	}
	cmd := exec.Command(bin, "worker", "-h")
	help, _ := cmd.CombinedOutput() // -h exits 0 or 2 depending on the flag package; the text is what counts
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(help), -1) {
		known[m[1]] = true
	}
	if !known["temporal"] {
		t.Fatalf("cannot read the flags of `ndtrace worker -h`:\n%s", help)
	}
	var used []string
	// The chart's flags, from the template that renders them.
	tpl, err := os.ReadFile(filepath.Join(chartDir, "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^- --([a-z][a-z0-9-]*)=`).FindAllStringSubmatch(string(tpl), -1) {
		used = append(used, m[1])
	}
	c := loadCompose(t)
	for _, a := range strs(get(c.Services["ndtrace-worker"], "command")) {
		if f, ok := strings.CutPrefix(a, "--"); ok {
			used = append(used, strings.SplitN(f, "=", 2)[0])
		}
	}
	if len(used) < 6 {
		t.Fatalf("found only flags %v", used)
	}
	for _, f := range used {
		if !known[f] {
			t.Errorf("--%s is not a flag of `ndtrace worker` (%s -h)", f, bin)
		}
	}
}

// get walks nested maps; nil when a key is missing.
func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func container(t *testing.T, dep map[string]any) map[string]any {
	t.Helper()
	cs, _ := get(dep, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		t.Fatalf("want one container, got %v", cs)
	}
	return cs[0].(map[string]any)
}

func wantKinds(t *testing.T, objs map[string]map[string]any, kinds ...string) {
	t.Helper()
	for _, k := range kinds {
		if _, ok := objs[k]; !ok {
			t.Errorf("no %s rendered", k)
		}
	}
}

func sameLabels(a, b any) bool {
	ma, _ := a.(map[string]any)
	mb, _ := b.(map[string]any)
	if len(ma) == 0 || len(ma) != len(mb) {
		return false
	}
	for k, v := range ma {
		if mb[k] != v {
			return false
		}
	}
	return true
}

// TestChartNotes renders NOTES.txt (which helm template leaves out) by wrapping it in a
// ConfigMap in a copy of the chart.
func TestChartNotes(t *testing.T) {
	helm := tool(t, "helm")
	dir := filepath.Join(t.TempDir(), "ndtrace")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "templates", "NOTES.txt"))
	wrapped := "{{- define \"notes-check\" }}" + string(notes) + "{{- end }}"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: {{ include \"notes-check\" . | quote }}\n"
	if os.WriteFile(filepath.Join(dir, "templates", "_notes.tpl"), []byte(wrapped), 0o644) != nil ||
		os.WriteFile(filepath.Join(dir, "templates", "notes-check.yaml"), []byte(cm), 0o644) != nil {
		t.Fatal("cannot write the wrapper")
	}
	for _, set := range []string{"submit.enabled=true", "autoscaling.enabled=false,storage.existingSecret=s,metrics.enabled=false"} {
		out, err := run(t, helmEnv(t), helm, "template", "ndtrace", dir, "--namespace", "ndtrace", "--kube-version", kubeVersion,
			"--show-only", "templates/notes-check.yaml", "--set", set)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := get(docs(t, out)[0], "data", "notes").(string)
		for _, want := range []string{"Deployment ndtrace in namespace ndtrace", "temporal-frontend.temporal.svc:7233", "Submit a dataset"} {
			if !strings.Contains(text, want) {
				t.Errorf("--set %s: NOTES lack %q:\n%s", set, want, text)
			}
		}
		if strings.Contains(set, "submit.enabled=true") != strings.Contains(text, "logs job/ndtrace-submit") {
			t.Errorf("--set %s: submit Job note wrong:\n%s", set, text)
		}
		if strings.Contains(set, "existingSecret") == strings.Contains(text, "No storage Secret") {
			t.Errorf("--set %s: storage note wrong:\n%s", set, text)
		}
	}
}
