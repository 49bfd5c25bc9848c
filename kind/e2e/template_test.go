//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/csi-registrar/csi-registrar/internal/drivercases"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The reference driver as a template: its one real feature, CSI ephemeral
// volumes, end to end with the example pod of manifests/examples/, first with
// the registrar sidecar (plainDir), then with in-process registration
// (manifests/overlays/in-process/, installed after the sidecar variant is
// uninstalled: never both for one driver name).
//
// Environment: E2E_EXAMPLE_ARCHIVE, the example image (default
// bin/example-image.tar, from `make example-image`).
const (
	examplesDir      = "manifests/examples"
	inProcessOverlay = "manifests/overlays/in-process"
	exampleNamespace = "csi-registrar-example"
	examplePod       = "csi-ephemeral-writer"
	exampleVolume    = "scratch" // the pod's volume name
	exampleFile      = "hello.txt"
)

// ephemeralVolumeID is the form of the kubelet's IDs for inline volumes.
var ephemeralVolumeID = regexp.MustCompile(`^csi-[0-9a-f]{64}$`)

func TestTemplate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	loadExampleImage(t, ctx)
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"1_ephemeral_volume_sidecar", testEphemeralSidecar},
		{"2_ephemeral_volume_in_process", testEphemeralInProcess},
	} {
		t.Run(c.name, c.f)
	}
}

// loadExampleImage loads the example workload's image onto the nodes.
func loadExampleImage(t testing.TB, ctx context.Context) {
	t.Helper()
	archive := os.Getenv("E2E_EXAMPLE_ARCHIVE")
	if archive == "" {
		archive = filepath.Join(cl.RepoRoot, "bin", "example-image.tar")
	}
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("example image: %v (run `make example-image`, or set E2E_EXAMPLE_ARCHIVE)", err)
	}
	t0 := time.Now()
	if err := cl.Provider.LoadImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
	measure(t, "load the example image", time.Since(t0))
}

// 1. With plainDir (the registrar sidecar): the example pod runs with its
// inline volume mounted, and deleting it leaves nothing behind.
func testEphemeralSidecar(t *testing.T) {
	ctx, _ := begin(t)
	ephemeralVolumeCase(t, ctx)
}

// 2. In-process registration: uninstall plainDir, install the single-
// container variant, check that it registers, then run case 1's checks.
// plainDir is deployed again at the end, as the other cases expect it.
func testEphemeralInProcess(t *testing.T) {
	ctx, _ := begin(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := cl.Delete(ctx, inProcessOverlay); err != nil {
			t.Errorf("restore "+plainDir+": %v", err)
			return
		}
		if err := waitUnregistered(ctx, 60*time.Second); err != nil {
			t.Errorf("restore "+plainDir+": %v", err)
			return
		}
		if err := cl.Apply(ctx, plainDir); err != nil {
			t.Errorf("restore "+plainDir+": %v", err)
			return
		}
		if err := cl.WaitDeployed(ctx, cfg, 3*time.Minute); err != nil {
			t.Errorf("restore "+plainDir+": %v", err)
		}
	})

	t0 := time.Now()
	if err := cl.Delete(ctx, plainDir); err != nil {
		t.Fatal(err)
	}
	if err := waitUnregistered(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	measure(t, "delete -k "+plainDir+" -> unregistered", time.Since(t0))

	ds, err := cl.RenderDaemonSet(ctx, inProcessOverlay)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%s renders %d containers, want 1 (the driver, registering itself)", inProcessOverlay, n)
	}
	t1 := time.Now()
	if err := cl.Apply(ctx, inProcessOverlay); err != nil {
		t.Fatal(err)
	}
	// The same driver name, node ID, topology and limit as plainDir; a pod
	// is Ready only when /readyz says the kubelet confirmed the registration.
	if err := cl.WaitDeployed(ctx, cfg, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	measure(t, "apply -k "+inProcessOverlay+" -> pod Ready and registered", time.Since(t1))
	for _, node := range allNodes {
		pod := podOn(t, ctx, node)
		if names := containerNames(pod); len(names) != 1 || names[0] != "driver" {
			t.Errorf("pod %s runs containers %q, want only the driver", pod.Name, names)
		}
		registrationSocket(t, ctx, node)
		checkRegistered(t, ctx, node)
		if code, body, err := cl.Readyz(ctx, pod.Name); err != nil || code != 200 {
			t.Errorf("/readyz of the in-process driver on %s: %d %q %v, want 200", node, code, body, err)
		}
	}

	ephemeralVolumeCase(t, ctx)
}

// registrationSocket checks that the driver's one file in plugins_registry
// on node is its registration socket <driver>-reg.sock: the in-process
// overlay runs the rolling update (the handover), as manifests/ does, whose
// one registration socket has the plain path.
func registrationSocket(t *testing.T, ctx context.Context, node string) {
	t.Helper()
	files, err := cl.Provider.PluginsRegistry(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	o := ours(files)
	want := cfg.Driver + csiplugin.RegistrationSocketSuffix
	if len(o) == 1 && o[0].Socket && o[0].Name == want {
		return
	}
	t.Fatalf("%s on %s: files of ours %q (sockets: %v), want exactly the registration socket %s",
		PluginsRegistry, node, names(o), o, want)
}

func containerNames(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// ephemeralVolumeCase applies manifests/examples/ and runs the example pod on
// every node in turn: where the scheduler puts it first, then a copy of it
// bound to each other node (spec.nodeName). On each node it checks: the pod
// reaches Running and Ready, the node has exactly one mount at the volume's
// target path, its source is a directory of the driver's state directory
// holding the file the pod wrote; deleting the pod leaves no mount under the
// pod's directory, no target path, no volume directory and no pod directory.
func ephemeralVolumeCase(t *testing.T, ctx context.Context) {
	t.Helper()
	stateDir := driverStateDir(t, ctx)
	pods := cl.Client.CoreV1().Pods(exampleNamespace)
	current := ""
	t.Cleanup(func() {
		if t.Failed() {
			exampleDiagnostics(t, current)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := cl.Delete(ctx, examplesDir); err != nil {
			t.Errorf("clean up %s: %v", examplesDir, err)
		}
	})

	t0 := time.Now()
	if err := cl.Apply(ctx, examplesDir); err != nil {
		t.Fatal(err)
	}
	pod := waitExamplePod(t, ctx)
	measure(t, "apply -k "+examplesDir+" -> pod Running and Ready", time.Since(t0))
	template := pod.DeepCopy()
	done := map[string]bool{}
	for {
		current = pod.Spec.NodeName
		ephemeralVolumeOn(t, ctx, pod, stateDir)
		done[current] = true
		next := ""
		for _, n := range allNodes {
			if !done[n] {
				next = n
				break
			}
		}
		if next == "" {
			return
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: template.Name, Namespace: template.Namespace, Labels: template.Labels},
			Spec:       *template.Spec.DeepCopy(),
		}
		p.Spec.NodeName = next
		t1 := time.Now()
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		current = next
		pod = waitExamplePod(t, ctx)
		measure(t, "example pod bound to "+next+" -> Running and Ready", time.Since(t1))
		if pod.Spec.NodeName != next {
			t.Fatalf("example pod on node %q, want %q", pod.Spec.NodeName, next)
		}
	}
}

// waitExamplePod waits until the example pod is Running and Ready.
func waitExamplePod(t *testing.T, ctx context.Context) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		p, err := cl.Client.CoreV1().Pods(exampleNamespace).Get(ctx, examplePod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended: %s", p.Name, p.Status.Phase)
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && drivercases.PodReady(p), nil
	})
	if err != nil {
		t.Fatalf("example pod not Running and Ready within %s: %v", podWait, err)
	}
	return pod
}

// ephemeralVolumeOn checks the running example pod's volume on its node,
// deletes the pod and checks that the node is left clean.
func ephemeralVolumeOn(t *testing.T, ctx context.Context, pod *corev1.Pod, stateDir string) {
	t.Helper()
	pods := cl.Client.CoreV1().Pods(exampleNamespace)
	node := pod.Spec.NodeName
	uid := string(pod.UID)
	podDir := filepath.Join(KubeletRoot, "pods", uid)
	target := filepath.Join(podDir, "volumes", "kubernetes.io~csi", exampleVolume, "mount")

	// The pod wrote its file through the mount.
	logs, err := pods.GetLogs(examplePod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "wrote /data/"+exampleFile) {
		t.Errorf("example pod log %q, want it to report writing /data/%s", logs, exampleFile)
	}

	// The node: one volume directory in the state directory, holding the file.
	entries := nodeTree(t, ctx, node, stateDir)
	var volID string
	for e, kind := range entries {
		if kind == "d" && !strings.Contains(e, "/") {
			if volID != "" {
				t.Fatalf("%s on %s holds more than one volume: %v", stateDir, node, entries)
			}
			volID = e
		}
	}
	if !ephemeralVolumeID.MatchString(volID) {
		t.Fatalf("%s on %s: %v, want one directory named as the kubelet names ephemeral volumes (csi-<sha256>)", stateDir, node, entries)
	}
	file := filepath.Join(stateDir, volID, exampleFile)
	content := nodeSh(t, ctx, node, "cat "+shellQuote(file))
	if want := fmt.Sprintf("written by pod %s/%s uid %s\n", exampleNamespace, examplePod, uid); content != want {
		t.Errorf("%s on %s = %q, want %q", file, node, content, want)
	}
	// ... bind-mounted at the target path, once.
	mounts := nodeMounts(t, ctx, node, podDir)
	if len(mounts) != 1 || mounts[0].point != target || !strings.HasSuffix(mounts[0].root, "/"+volID) {
		t.Errorf("mounts under %s on %s: %+v, want one, of .../%s at %s", podDir, node, mounts, volID, target)
	}
	t.Logf("pod %s: volume %s, %s = %q, mounted at %s", uid, volID, file, content, target)
	driverLogHas(t, ctx, node, "volume published", `volumeID="`+volID+`"`, `outcome="mounted"`) // klog text format

	// Delete the pod; the kubelet unpublishes the volume.
	t1 := time.Now()
	if err := pods.Delete(ctx, examplePod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, examplePod, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("example pod still there %s after its deletion: %v", podWait, err)
	}
	measure(t, "delete the example pod -> pod gone", time.Since(t1))
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, podWait, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, m := range nodeMounts(t, ctx, node, podDir) {
			left = append(left, "mount "+m.point)
		}
		for e := range nodeTree(t, ctx, node, stateDir) {
			left = append(left, filepath.Join(stateDir, e))
		}
		if nodeExists(t, ctx, node, podDir) {
			left = append(left, podDir)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Fatalf("%s after the example pod was deleted, on %s: %q", podWait, node, left)
	}
	measure(t, "delete the example pod -> no mount, no volume directory, no pod directory", time.Since(t1))
	driverLogHas(t, ctx, node, "volume unpublished", `volumeID="`+volID+`"`, `outcome="removed"`)
}

// driverStateDir is the driver's --state-dir in the deployed DaemonSet (the
// hostPath is mounted at the same path in the container).
func driverStateDir(t *testing.T, ctx context.Context) string {
	t.Helper()
	ds, err := cl.Client.AppsV1().DaemonSets(cl.Namespace).Get(ctx, cl.DaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "driver" {
			continue
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--state-dir="); ok {
				return v
			}
		}
	}
	t.Fatalf("DaemonSet %s: the driver has no --state-dir", ds.Name)
	return ""
}

// driverLogHas fails the test unless one line of the driver container's log
// on node contains every one of subs.
func driverLogHas(t *testing.T, ctx context.Context, node string, subs ...string) {
	t.Helper()
	pod := podOn(t, ctx, node)
	raw, err := cl.Client.CoreV1().Pods(cl.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "driver"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
lines:
	for _, line := range strings.Split(string(raw), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue lines
			}
		}
		return
	}
	t.Errorf("driver log of %s has no line with %q", pod.Name, subs)
}

// nodeSh runs a read-only shell script on node and returns its output: on
// the local node (this host) directly, on kind inside the node's container.
func nodeSh(t *testing.T, ctx context.Context, node, script string) string {
	t.Helper()
	switch p := cl.Provider.(type) {
	case *localProvider:
		if err := p.checkNode(node); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, "sh", "-c", script).Output()
		if err != nil {
			t.Fatalf("on %s: %q: %v", node, script, err)
		}
		return string(out)
	case *kindProvider:
		out, err := p.sh(ctx, node, script)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("provider %s cannot run commands on a node", cl.Provider.Name())
	return ""
}

// nodeTree lists dir on node recursively: relative path → find's type letter
// (d, f, ...). A missing dir is empty.
func nodeTree(t *testing.T, ctx context.Context, node, dir string) map[string]string {
	t.Helper()
	out := nodeSh(t, ctx, node, "[ ! -e "+shellQuote(dir)+" ] || find "+shellQuote(dir)+` -mindepth 1 -printf '%y %P\n'`)
	tree := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if kind, path, ok := strings.Cut(line, " "); ok {
			tree[path] = kind
		}
	}
	return tree
}

func nodeExists(t *testing.T, ctx context.Context, node, path string) bool {
	t.Helper()
	return strings.TrimSpace(nodeSh(t, ctx, node, "[ -e "+shellQuote(path)+" ] && echo yes || echo no")) == "yes"
}

// nodeMount is one line of the node's mount table.
type nodeMount struct {
	root  string // the mounted directory, within its file system
	point string // where it is mounted
}

// nodeMounts returns the mounts at or below dir in the node's (the
// kubelet's) mount namespace.
func nodeMounts(t *testing.T, ctx context.Context, node, dir string) []nodeMount {
	t.Helper()
	var out []nodeMount
	for _, line := range strings.Split(nodeSh(t, ctx, node, "cat /proc/self/mountinfo"), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := nodeMount{root: unescapeMountinfo(f[3]), point: unescapeMountinfo(f[4])}
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m)
		}
	}
	return out
}

// unescapeMountinfo undoes the octal escapes of /proc/self/mountinfo (\040
// for a space, \011, \012, \134).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// exampleDiagnostics logs the example pod's status, events and log.
func exampleDiagnostics(t *testing.T, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if p, err := cl.Client.CoreV1().Pods(exampleNamespace).Get(ctx, examplePod, metav1.GetOptions{}); err == nil {
		t.Logf("example pod: phase %s, conditions %+v, containers %+v", p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	}
	if evs, err := cl.Client.CoreV1().Events(exampleNamespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	if raw, err := cl.Client.CoreV1().Pods(exampleNamespace).GetLogs(examplePod, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
		t.Logf("example pod log:\n%s", raw)
	}
	if log, err := cl.Provider.KubeletLog(ctx, node, 40); err == nil {
		t.Logf("kubelet log of %s:\n%s", node, log)
	}
}
