package deploy

import (
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// compose is the part of a Compose file the tests look at.
type compose struct {
	Services map[string]map[string]any `yaml:"services"`
	Configs  map[string]map[string]any `yaml:"configs"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	var top map[string]any
	if err := yaml.Unmarshal(data, &top); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for k := range top {
		if !slices.Contains([]string{"name", "services", "configs", "volumes", "networks", "secrets"}, k) && !strings.HasPrefix(k, "x-") {
			t.Errorf("compose.yaml: unknown top-level key %q", k)
		}
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// interpolate resolves ${VAR:-default} and ${VAR} the way Compose does, with an empty
// environment, and turns $$ into $.
func interpolate(s string) string {
	s = regexp.MustCompile(`\$\{[A-Z0-9_]+:-([^}]*)\}`).ReplaceAllString(s, "$1")
	s = regexp.MustCompile(`\$\{[A-Z0-9_]+\}`).ReplaceAllString(s, "")
	return strings.ReplaceAll(s, "$$", "$")
}

// envOf returns a service's environment as a map (map or list syntax).
func envOf(svc map[string]any) map[string]string {
	out := map[string]string{}
	switch e := svc["environment"].(type) {
	case map[string]any:
		for k, v := range e {
			out[k] = interpolate(strings.TrimSpace(strings.Trim(yamlScalar(v), `"`)))
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(yamlScalar(kv), "=")
			out[k] = interpolate(v)
		}
	}
	return out
}

func yamlScalar(v any) string {
	if v == nil {
		return ""
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// TestCompose checks the local cluster: every service has a pinned image or a build, the
// references between services, configs and volumes resolve, and the workers' flags and
// environment point at the services that provide them.
func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, want := range []string{"postgresql", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "minio", "minio-bucket", "ndtrace-worker", "ndtrace-submit"} {
		if c.Services[want] == nil {
			t.Errorf("no service %s", want)
		}
	}
	for name, svc := range c.Services {
		img, _ := svc["image"].(string)
		img = interpolate(img)
		if img == "" && svc["build"] == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if img != "" && svc["build"] == nil && img != "ndtrace:dev" {
			ref := img[strings.LastIndex(img, "/")+1:]
			if _, tag, ok := strings.Cut(ref, ":"); !ok || tag == "" || tag == "latest" {
				t.Errorf("%s: image %q is not pinned to a tag", name, img)
			}
		}
		if img == "ndtrace:dev" && svc["build"] == nil && c.Services["ndtrace-worker"]["image"] != "ndtrace:dev" {
			t.Errorf("%s uses ndtrace:dev, which no service builds", name)
		}
		deps := map[string]any{}
		switch d := svc["depends_on"].(type) {
		case map[string]any:
			deps = d
		case []any:
			for _, n := range d {
				deps[n.(string)] = nil
			}
		}
		for dep, cond := range deps {
			if c.Services[dep] == nil {
				t.Errorf("%s depends on unknown service %s", name, dep)
			}
			if get(cond, "condition") == "service_healthy" && c.Services[dep]["healthcheck"] == nil {
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
		for _, cf := range asList(svc["configs"]) {
			src, _ := get(cf, "source").(string)
			if c.Configs[src] == nil || c.Configs[src]["content"] == nil && c.Configs[src]["file"] == nil {
				t.Errorf("%s uses undefined config %v", name, cf)
			}
		}
		for _, v := range asList(svc["volumes"]) {
			s, _ := v.(string)
			if src, _, ok := strings.Cut(s, ":"); ok && !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, declared := c.Volumes[src]; !declared {
					t.Errorf("%s uses undeclared volume %s", name, src)
				}
			}
		}
		for k, v := range envOf(svc) {
			if strings.Contains(v, "${") {
				t.Errorf("%s: %s=%s is not interpolated", name, k, v)
			}
		}
	}

	// The worker: built from deploy/Dockerfile with the repository as context.
	w := c.Services["ndtrace-worker"]
	ctx, _ := get(w, "build", "context").(string)
	df, _ := get(w, "build", "dockerfile").(string)
	if ctx != ".." || df != "deploy/Dockerfile" {
		t.Errorf("worker build: context %q dockerfile %q", ctx, df)
	}
	if _, err := os.Stat(filepath.Join(ctx, df)); err != nil {
		t.Error(err)
	}
	if r := interpolate(yamlScalar(get(w, "deploy", "replicas"))); r == "" || r == "0" {
		t.Errorf("worker replicas %q", r)
	}
	flags := map[string]string{}
	for _, a := range strs(w["command"]) {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	host, port, _ := strings.Cut(flags["temporal"], ":")
	if c.Services[host] == nil || !slices.ContainsFunc(strs(c.Services[host]["ports"]), func(p string) bool { return strings.HasSuffix(p, ":"+port) }) {
		t.Errorf("--temporal=%s is not the temporal service's frontend port", flags["temporal"])
	}
	if flags["namespace"] == "" || !strings.Contains(yamlScalar(c.Services["temporal-namespace"]["command"]), "create -n "+flags["namespace"]) {
		t.Errorf("--namespace=%s is not the namespace temporal-namespace creates", flags["namespace"])
	}
	if !strings.HasPrefix(get(c.Services["temporal-ui"], "environment", "TEMPORAL_ADDRESS").(string), host+":") {
		t.Error("temporal-ui does not point at the temporal service")
	}
	// The sandbox's needs: unprivileged, seccomp and AppArmor off, writable /tmp on a read-only root.
	if w["user"] != "10001:10001" || w["read_only"] != true || !slices.Contains(strs(w["cap_drop"]), "ALL") {
		t.Errorf("worker user/read_only/cap_drop: %v %v %v", w["user"], w["read_only"], w["cap_drop"])
	}
	for _, o := range []string{"seccomp=unconfined", "apparmor=unconfined", "no-new-privileges=true", "systempaths=unconfined"} {
		if !slices.Contains(strs(w["security_opt"]), o) {
			t.Errorf("worker security_opt lacks %s", o)
		}
	}
	if w["privileged"] != nil || w["cap_add"] != nil {
		t.Error("the worker must not be privileged or gain capabilities")
	}
	tmpfs := strings.Join(strs(w["tmpfs"]), " ")
	if !strings.Contains(tmpfs, "/tmp:") || !strings.Contains(tmpfs, "/var/lib/ndtrace:") {
		t.Errorf("worker tmpfs %q: want /tmp and /var/lib/ndtrace", tmpfs)
	}

	// Storage: the worker's credentials are MinIO's, the example spec writes to MinIO's bucket.
	wenv, menv := envOf(w), envOf(c.Services["minio"])
	if wenv["AWS_ACCESS_KEY_ID"] == "" || wenv["AWS_ACCESS_KEY_ID"] != menv["MINIO_ROOT_USER"] || wenv["AWS_SECRET_ACCESS_KEY"] != menv["MINIO_ROOT_PASSWORD"] {
		t.Errorf("worker S3 credentials %v do not match MinIO's %v", wenv, menv)
	}
	spec, _ := c.Configs["example-spec"]["content"].(string)
	var s struct {
		Output  string           `yaml:"output"`
		Sources []map[string]any `yaml:"sources"`
	}
	if err := yaml.Unmarshal([]byte(spec), &s); err != nil || s.Output == "" || len(s.Sources) == 0 {
		t.Fatalf("example spec: %v %q", err, spec)
	}
	u, err := url.Parse(s.Output)
	if err != nil || u.Scheme != "s3" {
		t.Fatalf("example spec output %q: %v", s.Output, err)
	}
	ep, err := url.Parse(u.Query().Get("endpoint"))
	if err != nil || c.Services[ep.Hostname()] == nil || u.Query().Get("use_path_style") != "true" {
		t.Errorf("example spec endpoint %q is not a compose service (path style on)", u.Query().Get("endpoint"))
	}
	if !strings.Contains(yamlScalar(c.Services["minio-bucket"]["command"]), "local/"+u.Host) {
		t.Errorf("bucket %s is not created by minio-bucket", u.Host)
	}
	// The submit helper runs `ndtrace submit` against the same Temporal with the example spec.
	sub := c.Services["ndtrace-submit"]
	if !slices.Equal(strs(sub["entrypoint"]), []string{"/usr/local/bin/ndtrace", "submit"}) ||
		!slices.Contains(strs(sub["command"]), "--temporal="+flags["temporal"]) {
		t.Errorf("ndtrace-submit: %v %v", sub["entrypoint"], sub["command"])
	}
	target, _ := get(asList(sub["configs"])[0], "target").(string)
	if !slices.Contains(strs(sub["command"]), "--spec="+target) {
		t.Errorf("ndtrace-submit reads a spec other than the mounted %s", target)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// TestComposeSpec loads compose.yaml with compose-go, the loader Docker Compose itself uses
// (its cmd, installed as bin/compose-spec): the Compose Specification's JSON schema, interpolation
// and the model's consistency checks.
func TestComposeSpec(t *testing.T) {
	cs := tool(t, "compose-spec")
	cmd := exec.Command(cs, "-format", "json", "compose.yaml")
	// Only PATH and HOME: no COMPOSE_* or image variables from the caller's environment.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compose-spec compose.yaml: %v\n%s", err, stderr.String())
	}
	var model struct {
		Services map[string]struct {
			Image string `json:"image"`
		} `json:"services"`
	}
	if err := json.Unmarshal(out, &model); err != nil {
		t.Fatalf("compose-spec output: %v\n%s", err, out)
	}
	if len(model.Services) < 8 || model.Services["temporal"].Image != "temporalio/server:1.31.0" {
		t.Errorf("loaded model: %d services, temporal image %q", len(model.Services), model.Services["temporal"].Image)
	}
}
