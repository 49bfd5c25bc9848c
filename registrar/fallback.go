package registrar

import (
	"strings"

	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
)

// The way out of the rolling-update mode when the kubelet cannot take its
// version. The mode announces CSI version 1.<v>.0 with a 13-digit v; the
// kubelets it is proven with (1.34-1.37) parse the minor as a 64-bit
// number. A kubelet that cannot parse it (or refuses it otherwise) rejects
// the announcement in ValidatePlugin, naming the version: this instance
// then leaves the mode for the life of its container and registers as the
// plain registrar does (<driver>-reg.sock, version 1.0.0), with its
// rollouts' 1-2 s gap.
//
// The mode announces the large version alone: a list with 1.0.0 would
// change nothing where the large minor parses (the kubelet takes the
// highest), and where it does not it would let the first instance register
// as 1.0.0 and every later one be refused as "a higher version is already
// registered", which the mode cannot tell from a lost race, instead of a
// refusal that names its version.

// decisionFallback counts the instances that left the mode because the
// kubelet refused its version (csi_registrar_rolling_update_decisions_total).
const decisionFallback = "fallback"

// versionRefused reports whether the kubelet's rejection of the current
// announcement refuses its version itself: the error names 1.<v>.0 and is
// not the CSI handler's "a higher version is already registered".
func (l *loop) versionRefused(kubeletErr string) bool {
	self, _ := l.roll.self.get()
	return self.Version != 0 && strings.Contains(kubeletErr, csiplugin.RollingUpdateVersion(self.Version)) &&
		!strings.Contains(kubeletErr, "higher supported version")
}

// fallBack leaves the mode and registers as the plain registrar: the
// refused announcement and any earlier one are unlinked by name (the
// kubelet never registered them: its validation refuses every such
// version), the mode's watches and files end, and the plain socket is
// created (or, if another registrar serves it, awaited as without the mode).
func (l *loop) fallBack(s step) {
	self, _ := l.roll.self.get()
	l.decision(decisionFallback, s.reason, "refusedVersion", csiplugin.RollingUpdateVersion(self.Version),
		"kubeletError", l.sock.handled.GetError())
	l.closeSocket("rejected")
	for _, ss := range l.roll.previous {
		ss.stop()
	}
	l.roll.previous = nil
	l.rollEnd()
	l.roll, l.fellBack = nil, true
	path := l.r.opts.regPath
	if l.r.opts.DriverName == "" {
		path, _ = csiplugin.RegistrationSocketPath(l.r.opts.PluginRegistrationPath, l.driver.name) // identify checked it
	}
	l.sock.path = path
	l.log = l.r.log.With("driver", l.driver.name, "socket", path)
	l.r.status.update(func(st *Status) { st.SocketPath = path })
	l.create(reasonStart)
}
