package drivercases

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/csi-registrar/csi-registrar/internal/drivercases/driverspec"
	corev1 "k8s.io/api/core/v1"
)

// ReadinessDoc is the section of the docs every readiness verdict links.
const ReadinessDoc = "docs/writing-a-driver.md, \"Is my driver ready for rolling updates?\""

// hostPort is a port a pod of the workload binds on the node.
type hostPort struct {
	Port, Where string
}

// portFlag: a flag whose name says port, endpoint, address or listen and
// whose value ends in a TCP port (":9808", "0.0.0.0:8080", "9808"), not a
// unix socket.
var portFlag = regexp.MustCompile(`^--?[a-z0-9-]*(port|endpoint|address|listen)[a-z0-9-]*$`)
var portValue = regexp.MustCompile(`^(tcp://)?([0-9a-zA-Z.\[\]-]*:)?([0-9]{2,5})$`)

// hostPorts lists the ports the workload's pod binds in the node's network:
// every containerPort (and hostPort) when the pod uses the host's network,
// a hostPort otherwise, and with the host's network the port flags of its
// containers' args that no containerPort declares.
func hostPorts(spec *corev1.PodSpec) []hostPort {
	var out []hostPort
	declared := map[string]bool{}
	cs := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range cs {
		for _, p := range c.Ports {
			switch {
			case p.HostPort != 0:
				out = append(out, hostPort{fmt.Sprint(p.HostPort), fmt.Sprintf("container %s: hostPort %d", c.Name, p.HostPort)})
			case spec.HostNetwork:
				out = append(out, hostPort{fmt.Sprint(p.ContainerPort), fmt.Sprintf("container %s: containerPort %d with hostNetwork", c.Name, p.ContainerPort)})
			default:
				continue
			}
			declared[out[len(out)-1].Port] = true
		}
	}
	if !spec.HostNetwork {
		return out
	}
	for _, c := range cs {
		args := append(append([]string(nil), c.Command...), c.Args...)
		for i := 0; i < len(args); i++ {
			name, val, ok := strings.Cut(args[i], "=")
			if !portFlag.MatchString(name) {
				continue
			}
			if !ok && i+1 < len(args) {
				val = args[i+1]
			}
			m := portValue.FindStringSubmatch(val)
			if m == nil || m[3] == "0" || declared[m[3]] {
				continue
			}
			declared[m[3]] = true
			out = append(out, hostPort{m[3], fmt.Sprintf("container %s: %s=%s with hostNetwork", c.Name, name, val)})
		}
	}
	return out
}

// surges reports whether a rollout of w starts the new pod beside the old
// one on its node (a DaemonSet with maxSurge, a Deployment pinned to one
// node with a surge).
func surges(w driverspec.Workload) bool {
	if w.OnDelete() || w.Kind == "StatefulSet" || w.Strategy == "Recreate" {
		return false
	}
	return w.MaxSurge != "0" && w.MaxSurge != "0%" && w.MaxSurge != ""
}

// perPod reports whether a socket path differs between two pods of the
// workload: it names a value of the pod ($(POD_UID), $(POD_NAME)...).
func perPod(path string) bool { return strings.Contains(path, "$(") }

// modeFinding is the static readiness check of the manifests: the faults
// that stop a rollout in the mode before it starts (blocking: the new pod
// cannot run beside the old one), and, for manifests without the mode,
// what the mode would need.
type modeFinding struct {
	Ports    string   // with the mode (or a surge): a host port stalls every rollout
	Blocking []string // with the mode: what keeps it from handing over
	Needs    []string // without the mode: what turning it on takes
}

// checkModeManifests judges what the manifests say, before anything rolls.
func checkModeManifests(spec *driverspec.Spec) modeFinding {
	var f modeFinding
	w := spec.Workload
	ports := hostPorts(&w.Template.Spec)
	var where, nums []string
	for _, p := range ports {
		where, nums = append(where, p.Where), append(nums, p.Port)
	}
	portText := func() string {
		return fmt.Sprintf("the pod binds port(s) %s on the node (%s): the new pod cannot run beside the old one on its node (the scheduler refuses a second pod with the same host port; a port only in a flag: the new process cannot bind it), so a rollout with a surge stalls with the new pod Pending. Fix: drop hostNetwork (a CSI node plugin serves the kubelet on unix sockets and needs none), or give each instance its own port (0 or a per-pod value), or leave the port out of the node plugin",
			strings.Join(nums, ", "), strings.Join(where, "; "))
	}
	mode := spec.RollingUpdate != ""
	if (mode || surges(w)) && len(ports) > 0 {
		f.Ports = portText()
	}
	sock := spec.HostSocket
	if sock == "" {
		sock = spec.RegistrationPath
	}
	if mode {
		if w.Kind == "DaemonSet" && !surges(w) {
			f.Blocking = append(f.Blocking, fmt.Sprintf("%s has maxSurge %s: the old pod leaves before the new one starts, so the mode has no successor to hand over to (the registration socket), and the driver's calls stop until the new pod runs. Fix: maxSurge 1, maxUnavailable 0", w, orDash(w.MaxSurge)))
		}
		if sock != "" && !perPod(sock) {
			f.Blocking = append(f.Blocking, fmt.Sprintf("the driver's CSI socket %s is the same path for every pod: the new instance's socket replaces the old one's while the old instance still serves, and the endpoint link the kubelet dials (csi-endpoint.sock) has no instance of its own to point at, to move forward or fall back. Fix: a socket per pod, e.g. /csi/$(POD_UID).sock with POD_UID from the downward API, in the driver's --endpoint, the registrar's --csi-address and --kubelet-registration-path", sock))
		}
		return f
	}
	f.Needs = append(f.Needs, "--rolling-update=$(POD_UID) in the registrar's args (POD_UID from the downward API, metadata.uid)")
	if w.Kind == "DaemonSet" && !surges(w) {
		f.Needs = append(f.Needs, fmt.Sprintf("maxSurge 1, maxUnavailable 0 (now maxSurge %s)", orDash(w.MaxSurge)))
	}
	if sock != "" && !perPod(sock) {
		f.Needs = append(f.Needs, fmt.Sprintf("a CSI socket per pod (now %s for every pod): /csi/$(POD_UID).sock in the driver's endpoint, --csi-address and --kubelet-registration-path", sock))
	}
	if spec.HTTPPort == "" {
		f.Needs = append(f.Needs, "the registrar's --http-endpoint and a readinessProbe on /readyz (the controller deletes the old pod only once the kubelet confirmed the new one)")
	}
	if len(ports) > 0 {
		f.Needs = append(f.Needs, portText())
	}
	f.Needs = append(f.Needs, "a driver that shares its node state between two live instances and keeps serving a few seconds after SIGTERM (R2, R4)")
	return f
}
