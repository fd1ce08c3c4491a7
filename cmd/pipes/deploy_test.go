package main

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/source/sqs"
)

// The shutdown and memory rules the manifests follow, as the README and
// the code state them.
const (
	// stopMargin: everything after SIGTERM fits in --shutdown-timeout +
	// 6 s (pipe.stopGrace + pipe.settleMargin, plus a second of slack).
	stopMargin = 6 * time.Second
	// memoryMultiple: size containers at about 10 x --max-inflight-bytes
	// (README, Performance: 331 MiB of RSS with a 32 MiB budget).
	memoryMultiple = 10
	// measuredRSSPerBudget is that measurement, 331 MiB / 32 MiB.
	measuredRSSPerBudget = 331.0 / 32
)

// k8sDoc is the part of a Kubernetes object the test reads.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int         `yaml:"terminationGracePeriodSeconds"`
	Containers                    []container `yaml:"containers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type container struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	ImagePullPolicy string   `yaml:"imagePullPolicy"`
	Args            []string `yaml:"args"`
	Ports           []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	Lifecycle *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	SecurityContext *struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
		RunAsUser    int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// readManifest decodes every document of a manifest file.
func readManifest(t *testing.T, path string) []k8sDoc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []k8sDoc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d k8sDoc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, d)
	}
}

// parseQuantity reads a Kubernetes memory quantity (plain bytes or a
// binary or decimal suffix).
func parseQuantity(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.factor, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{{"384Mi", 384 << 20, true}, {"1Gi", 1 << 30, true}, {"500M", 500e6, true}, {"1024", 1024, true}, {"12Xi", 0, false}, {"", 0, false}}
	for _, tt := range tests {
		got, err := parseQuantity(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("parseQuantity(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// imageTheREADMEBuilds is the -t of the README's docker build command.
func imageTheREADMEBuilds(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`docker build -t (\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the README has no docker build -t command")
	}
	return string(m[1])
}

// runFlagsOf parses a container's args with pipes run's own flags.
func runFlagsOf(t *testing.T, args []string) (shutdown time.Duration, budget int64, metricsAddr string, files []string, watch bool) {
	t.Helper()
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("args %q do not start with run", args)
	}
	cmd := newRunCmd(newInterrupts(func() {}, func(int) {}, io.Discard), io.Discard, io.Discard)
	if err := cmd.ParseFlags(args[1:]); err != nil {
		t.Fatalf("pipes run refuses the args %q: %v", args, err)
	}
	fl := cmd.Flags()
	shutdown, _ = fl.GetDuration("shutdown-timeout")
	budget, _ = fl.GetInt64("max-inflight-bytes")
	metricsAddr, _ = fl.GetString("metrics-addr")
	files, _ = fl.GetStringArray("file")
	watch, _ = fl.GetBool("watch")
	return shutdown, budget, metricsAddr, files, watch
}

// TestTheKubernetesManifestsFollowTheCodesRules reads the Deployment of
// deploy/kubernetes and the sidecar example, parses the pipes container's
// args with pipes run's own flags (their defaults where not given), and
// checks that the manifests agree with them: the image the README builds,
// the grace period above --shutdown-timeout + the longest long poll +
// 6 s, memory at least 10 x --max-inflight-bytes (and above the measured
// RSS), requests equal to limits, probes on /readyz and /healthz at the
// metrics port, the pipeline file from the ConfigMap mounted where -f
// points, as a whole folder (a subPath mount never sees the ConfigMap's
// updates), with --watch so that an edit is picked up without a restart,
// and (sidecar) a target on localhost at the app's port, which
// outlives pipes' drain.
func TestTheKubernetesManifestsFollowTheCodesRules(t *testing.T) {
	image := imageTheREADMEBuilds(t)
	defaults := newRunCmd(newInterrupts(func() {}, func(int) {}, io.Discard), io.Discard, io.Discard).Flags()
	if d, _ := defaults.GetDuration("shutdown-timeout"); d != 30*time.Second {
		t.Errorf("pipes run's --shutdown-timeout default is %v; the manifests' comments say 30 s", d)
	}
	tests := []struct {
		name, path string
		sidecar    bool
	}{
		{"deploy/kubernetes", "../../deploy/kubernetes/deployment.yaml", false},
		{"examples/sidecar", "../../examples/sidecar/deployment.k8s.yaml", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dep *k8sDoc
			configMaps := map[string]k8sDoc{}
			for _, d := range readManifest(t, tt.path) {
				switch d.Kind {
				case "Deployment":
					dep = &d
				case "ConfigMap":
					configMaps[d.Metadata.Name] = d
				}
			}
			if dep == nil {
				t.Fatal("no Deployment")
			}
			pod := dep.Spec.Template.Spec
			var pipes, app *container
			for i := range pod.Containers {
				if c := &pod.Containers[i]; c.Name == "pipes" {
					pipes = c
				} else {
					app = c
				}
			}
			if pipes == nil {
				t.Fatal("no container named pipes")
			}
			if pipes.Image != image || pipes.ImagePullPolicy != "IfNotPresent" {
				t.Errorf("the pipes image is %s (pull %q), want %s, the image the README builds, pulled if not present", pipes.Image, pipes.ImagePullPolicy, image)
			}
			shutdown, budget, metricsAddr, files, watch := runFlagsOf(t, pipes.Args)

			grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
			if need := shutdown + sqs.MaxWaitTime + stopMargin; grace < need {
				t.Errorf("terminationGracePeriodSeconds %v is under --shutdown-timeout %v + a long poll %v + %v", grace, shutdown, sqs.MaxWaitTime, stopMargin)
			}

			limit, err := parseQuantity(pipes.Resources.Limits["memory"])
			if err != nil {
				t.Fatalf("memory limit: %v", err)
			}
			request, err := parseQuantity(pipes.Resources.Requests["memory"])
			if err != nil {
				t.Fatalf("memory request: %v", err)
			}
			if budget <= 0 || limit < memoryMultiple*budget || float64(limit) < measuredRSSPerBudget*float64(budget) {
				t.Errorf("memory limit %d B for --max-inflight-bytes %d: want at least %d x the budget (and the measured %.1f x)", limit, budget, memoryMultiple, measuredRSSPerBudget)
			}
			if request != limit {
				t.Errorf("memory request %d B differs from the limit %d B", request, limit)
			}

			_, port, _ := strings.Cut(metricsAddr, ":")
			metricsPort := ""
			for _, p := range pipes.Ports {
				if strconv.Itoa(p.ContainerPort) == port {
					metricsPort = p.Name
				}
			}
			if metricsPort == "" || !strings.HasPrefix(metricsAddr, "0.0.0.0:") {
				t.Errorf("--metrics-addr %q: want 0.0.0.0 (probes come from the kubelet) on a named container port, ports %+v", metricsAddr, pipes.Ports)
			}
			for _, p := range []struct {
				what string
				pr   *probe
				path string
			}{{"readiness", pipes.ReadinessProbe, "/readyz"}, {"liveness", pipes.LivenessProbe, "/healthz"}} {
				if p.pr == nil || p.pr.HTTPGet == nil || p.pr.HTTPGet.Path != p.path || p.pr.HTTPGet.Port != metricsPort {
					t.Errorf("the %s probe is %+v, want GET %s on port %s", p.what, p.pr, p.path, metricsPort)
				}
			}
			if sc := pipes.SecurityContext; sc == nil || !sc.RunAsNonRoot || sc.RunAsUser == 0 {
				t.Errorf("securityContext %+v: want runAsNonRoot with a numeric user (the image's user is a name)", sc)
			}

			if len(files) != 1 || !strings.HasPrefix(files[0], "/etc/pipes/") {
				t.Fatalf("-f %q: want one file under /etc/pipes", files)
			}
			var configMap, volume string
			for _, v := range pod.Volumes {
				if v.ConfigMap != nil {
					configMap, volume = v.ConfigMap.Name, v.Name
				}
			}
			mounted := false
			for _, m := range pipes.VolumeMounts {
				if m.Name != volume {
					continue
				}
				mounted = true
				if m.MountPath != path.Dir(files[0]) || m.SubPath != "" {
					t.Errorf("the ConfigMap volume %s is mounted at %s (subPath %q): want the folder of -f, %s, without subPath (a subPath mount does not receive the ConfigMap's updates)", volume, m.MountPath, m.SubPath, path.Dir(files[0]))
				}
			}
			if configMap == "" || !mounted {
				t.Errorf("no ConfigMap volume mounted in the pipes container (volumes %+v, mounts %+v)", pod.Volumes, pipes.VolumeMounts)
			}
			if !watch {
				t.Errorf("args %q: want --watch, so that an edit of the ConfigMap %s is picked up without a restart", pipes.Args, configMap)
			}
			var pipeline []byte
			if cm, ok := configMaps[configMap]; ok {
				pipeline = []byte(cm.Data[strings.TrimPrefix(files[0], "/etc/pipes/")])
			} else if tt.sidecar {
				// Created from the example's file (see its comments).
				if pipeline, err = os.ReadFile("../../examples/sidecar/pipeline.yaml"); err != nil {
					t.Fatal(err)
				}
				if b, _ := os.ReadFile(tt.path); !bytes.Contains(b, []byte("kubectl create configmap "+configMap+" --from-file=pipeline.yaml=examples/sidecar/pipeline.yaml")) {
					t.Errorf("the manifest does not say how to create the ConfigMap %s from the example's pipeline file", configMap)
				}
			}
			specs, err := config.Loader{}.Parse(files[0], pipeline)
			if err != nil || len(specs) != 1 {
				t.Fatalf("the mounted pipeline file does not load: %v", err)
			}
			if !tt.sidecar {
				return
			}
			if app == nil {
				t.Fatal("no app container beside pipes")
			}
			u, err := url.Parse(specs[0].Target.URL)
			if err != nil || u.Hostname() != "localhost" || len(app.Ports) == 0 || u.Port() != strconv.Itoa(app.Ports[0].ContainerPort) {
				t.Errorf("the target %s is not the app's port %+v on localhost", specs[0].Target.URL, app.Ports)
			}
			if app.Lifecycle == nil || app.Lifecycle.PreStop == nil || app.Lifecycle.PreStop.Sleep == nil {
				t.Fatal("the app has no preStop sleep: it would stop while pipes still drains into it")
			}
			sleep := time.Duration(app.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			if sleep < shutdown+stopMargin || sleep >= grace {
				t.Errorf("the app's preStop sleeps %v: want at least --shutdown-timeout %v + %v, and under the grace period %v", sleep, shutdown, stopMargin, grace)
			}
		})
	}
}
