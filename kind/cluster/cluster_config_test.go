// Package kind_test checks kind/cluster/cluster.yaml, the kind cluster of `make demo`
// and `make e2e-kind`, on machines where kind itself cannot run (no Docker).
package kind_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/defaults"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

const configFile = "cluster.yaml"

// pinnedNode is a node image pinned by tag and digest.
var pinnedNode = regexp.MustCompile(`^kindest/node:v1\.[0-9]+\.[0-9]+@sha256:[0-9a-f]{64}$`)

// fakeRuntime is a stand-in for nerdctl that lets kind's Provider.Create run
// up to the first provisioning step and no further. It answers `info` (a
// cgroup v2 runtime), lists no containers (`ps`), says every image is present
// (`inspect --type=image`), and fails everything else, the network set-up
// being the next step. Every call is appended to $FAKE_RUNTIME_LOG.
const fakeRuntime = `#!/bin/sh
echo "$*" >>"$FAKE_RUNTIME_LOG"
case "$1" in
  info) echo '{"CgroupDriver":"cgroupfs","CgroupVersion":"2","MemoryLimit":true,"PidsLimit":true,"CPUShares":true}' ;;
  ps) ;;
  inspect) [ "$2" = "--type=image" ] || exit 1 ;;
  *) echo "fake runtime: stop at: $*" >&2; exit 1 ;;
esac
`

// loadWithKind hands the file to kind's own Provider.Create with a fake
// runtime. kind's loader is internal (pkg/internal/apis/config/encoding); its
// public entry is cluster.CreateWithConfigFile, which Create applies first:
// it reads the file, checks apiVersion and kind, decodes it strictly (unknown
// fields fail), defaults and converts it. Create then asks the runtime for
// its info and for existing nodes, runs kind's Validate on the config (node
// roles, at least one control plane, names, subnets, ports), and only then
// starts provisioning with the node images. It returns the images provisioning
// asked for (nil if it never got there) and Create's error.
func loadWithKind(t *testing.T, path string) ([]string, error) {
	t.Helper()
	dir := t.TempDir()
	bin, log := filepath.Join(dir, "nerdctl"), filepath.Join(dir, "calls.log")
	if err := os.WriteFile(bin, []byte(fakeRuntime), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_RUNTIME_LOG", log)
	p := cluster.NewProvider(cluster.ProviderWithNerdctl(bin), cluster.ProviderWithLogger(kindlog.NoopLogger{}))
	err := p.Create("", cluster.CreateWithConfigFile(path),
		cluster.CreateWithDisplayUsage(false), cluster.CreateWithDisplaySalutation(false))
	calls, _ := os.ReadFile(log)
	var images []string
	for _, c := range strings.Split(string(calls), "\n") {
		if img, ok := strings.CutPrefix(c, "inspect --type=image "); ok {
			images = append(images, img)
		}
	}
	return images, err
}

// TestClusterConfigLoadsWithKind: kind accepts kind/cluster/cluster.yaml and gets as
// far as provisioning its pinned node image.
func TestClusterConfigLoadsWithKind(t *testing.T) {
	images, err := loadWithKind(t, configFile)
	if len(images) == 0 {
		t.Fatalf("kind rejected %s before provisioning: %v", configFile, err)
	}
	if err == nil || !strings.Contains(err.Error(), "network") {
		t.Fatalf("kind stopped at %v, want the fake runtime's network step", err)
	}
	for _, img := range images {
		if img != defaults.Image {
			t.Errorf("kind provisions image %q, want %q: the node image go.mod's sigs.k8s.io/kind was released with (its defaults.Image)", img, defaults.Image)
		}
	}
}

// decodeStrict decodes a kind config file into kind's public v1alpha4 types,
// unknown fields failing, as kind's loader decodes it.
func decodeStrict(t *testing.T, path string) v1alpha4.Cluster {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	d := yaml.NewDecoder(bytes.NewReader(raw))
	d.KnownFields(true)
	if err := d.Decode(&c); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, raw)
	}
	return c
}

// TestClusterConfigShape decodes the file into kind's public v1alpha4 types,
// as strictly as kind's loader does, and checks what the project relies on:
// one control plane and two workers, each on a pinned node image.
func TestClusterConfigShape(t *testing.T) {
	c := decodeStrict(t, configFile)
	if c.Kind != "Cluster" || c.APIVersion != "kind.x-k8s.io/v1alpha4" {
		t.Errorf("kind %q apiVersion %q, want Cluster kind.x-k8s.io/v1alpha4", c.Kind, c.APIVersion)
	}
	if c.Name != "csi-registrar" {
		t.Errorf("name %q, want csi-registrar (kind/lib.sh and the e2e suite use it)", c.Name)
	}
	v1alpha4.SetDefaultsCluster(&c)
	roles := map[v1alpha4.NodeRole]int{}
	for i, n := range c.Nodes {
		roles[n.Role]++
		if !pinnedNode.MatchString(n.Image) {
			t.Errorf("node %d (%s): image %q, want a kindest/node pinned by tag and digest", i, n.Role, n.Image)
		}
	}
	if len(c.Nodes) != 3 || roles[v1alpha4.ControlPlaneRole] != 1 || roles[v1alpha4.WorkerRole] != 2 {
		t.Errorf("nodes %v, want 1 control-plane and 2 workers", roles)
	}
}

// TestBrokenConfigsAreRejected shows that the loader test fails for broken
// files: each of these is rejected by kind before provisioning.
func TestBrokenConfigsAreRejected(t *testing.T) {
	raw, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	good := string(raw)
	for name, broken := range map[string]string{
		"unknown field":    strings.Replace(good, "nodes:", "nodez: []\nnodes:", 1),
		"wrong apiVersion": strings.Replace(good, "kind.x-k8s.io/v1alpha4", "kind.x-k8s.io/v1alpha3", 1),
		"invalid role":     strings.Replace(good, "role: worker", "role: master", 1),
		"no control plane": strings.Replace(good, "role: control-plane", "role: worker", 1),
		"invalid name":     strings.Replace(good, "name: csi-registrar", "name: CSI_Registrar", 1),
		"not YAML":         good + "\n  - role: [\n",
	} {
		t.Run(name, func(t *testing.T) {
			if broken == good {
				t.Fatalf("the mutation did not apply to %s", configFile)
			}
			path := filepath.Join(t.TempDir(), "cluster.yaml")
			if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
				t.Fatal(err)
			}
			images, err := loadWithKind(t, path)
			if err == nil || len(images) > 0 {
				t.Fatalf("kind accepted it (provisioning asked for %q, error %v)", images, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

// TestOfflineConfig: the config kind/cluster/cluster.sh writes for the node image built
// here (kind/cluster/nodeimage) is accepted by kind's loader, keeps cluster.yaml's three
// nodes on that image, turns off the default CNI (kindnetd is not in the image),
// and tells 1.35+ kubelets to run on cgroup v1 exactly when this host is on it.
func TestOfflineConfig(t *testing.T) {
	const image = "csi-registrar/kind-node:test"
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	cgroupV1 := err != nil
	for _, k8s := range []string{"1.34", "1.35", "1.36", "1.37"} {
		t.Run(k8s, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cluster.yaml")
			cmd := exec.Command("bash", "cluster.sh", "config", image, path)
			cmd.Env = append(os.Environ(), "K8S="+k8s)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("cluster.sh config: %v: %s", err, out)
			}
			images, err := loadWithKind(t, path)
			if len(images) == 0 {
				t.Fatalf("kind rejected the generated config before provisioning: %v", err)
			}
			for _, img := range images {
				if img != image {
					t.Errorf("kind provisions %q, want %q", img, image)
				}
			}
			c := decodeStrict(t, path)
			if len(c.Nodes) != 3 || !c.Networking.DisableDefaultCNI {
				t.Errorf("%d nodes, disableDefaultCNI %v; want 3 and true", len(c.Nodes), c.Networking.DisableDefaultCNI)
			}
			patched := strings.Contains(strings.Join(c.KubeadmConfigPatches, "\n"), "failCgroupV1: false")
			if want := cgroupV1 && k8s != "1.34"; patched != want {
				t.Errorf("failCgroupV1 patch present %v, want %v (cgroup v1 host: %v)", patched, want, cgroupV1)
			}
		})
	}
}

// TestOfflineConfigRefusesUnbuiltVersion: a Kubernetes version the local node
// does not build gets a clear error naming the supported ones, exit 2.
func TestOfflineConfigRefusesUnbuiltVersion(t *testing.T) {
	cmd := exec.Command("bash", "cluster.sh", "config", "x", filepath.Join(t.TempDir(), "c.yaml"))
	cmd.Env = append(os.Environ(), "K8S=1.33")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "supported: 1.34 1.35 1.36 1.37") {
		t.Fatalf("K8S=1.33: err %v, output %q; want exit 2 naming the supported versions", err, out)
	}
}
