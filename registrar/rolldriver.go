package registrar

import (
	"context"
	"time"
)

// The rolling-update mode's view of this instance's own driver, while
// another instance may hold the registration: the kubelet sends every CSI
// call to the endpoint of the last announcement it confirmed, so an
// instance whose driver does not answer must not hold it while another
// one's driver could. The instance asks its driver Probe every
// driverProbePeriod while another eligible instance runs (alone, it never
// does: the idle budget of reconcilePeriod holds); a driver that stops
// answering, or says not ready, is published (InstanceState.DriverDown) and
// an older instance takes the registration back. This one claims it again
// only once its driver has been ready for driverStableWindow.
const (
	// driverProbePeriod is how often an instance asks its driver Probe
	// while another eligible instance runs: as often as the manifests'
	// readiness probe asks /readyz (periodSeconds: 2), so that the older
	// instance takes the registration back no later than the kubelet marks
	// the pod not ready. A Probe costs about 15 context switches (see
	// reconcilePeriod): 7.5/s, only while two instances overlap (a rollout,
	// or a new pod that never got Ready).
	driverProbePeriod = 2 * time.Second
	// driverStableWindow is how long a driver that stopped must answer
	// Probe ready before its instance claims the registration again: five
	// probe periods in a row, so that a driver that flaps does not pull the
	// registration back and forth, and the kubelet's first crash-loop
	// back-off (10 s): a container that crashes within 10 s of each start
	// never takes the registration back from the older instance.
	driverStableWindow = 10 * time.Second
)

// decisionDriverDown is the mode's decision (see rolling.go's list) when
// this instance's driver stops answering Probe: published, no claim.
const decisionDriverDown = "driver-down"

// driverHealth is what the mode's Probes said of this instance's driver.
type driverHealth int

const (
	healthUnknown    driverHealth = iota // never answered Probe ready yet
	healthReady                          // ready (and, after a down, for driverStableWindow)
	healthDown                           // stopped answering, or said not ready, after it was ready
	healthRecovering                     // ready again after a down, for less than driverStableWindow
)

func (h driverHealth) String() string {
	return [...]string{"unknown", "ready", "down", "recovering"}[h]
}

// driverUnready reports whether this instance may not claim the
// registration while another instance may hold it.
func (m *rolling) driverUnready() bool { return m.health != healthReady }

// keepProbing arms the Probe alarm while another eligible instance runs,
// or the driver is down or recovering (so that driverDown, once published,
// is cleared also when the instance is alone by then), and stops it
// otherwise; a driver not known ready yet is asked at once.
func (l *loop) keepProbing() {
	m := l.roll
	if m.left || m.leaving {
		m.probe.stop()
		return
	}
	want := m.health == healthDown || m.health == healthRecovering
	for _, p := range m.peers {
		want = want || (peerState{st: p.st, known: p.known}).eligible()
	}
	switch {
	case !want:
		m.probe.stop()
	case !m.probe.armed() && m.health == healthUnknown:
		m.probe.set(0)
	case !m.probe.armed():
		m.probe.set(driverProbePeriod)
	}
}

// onProbeDue asks the driver Probe (its answer comes back as a
// driverAnswer) and arms the next one.
func (l *loop) onProbeDue(ctx context.Context) {
	l.roll.probe.set(driverProbePeriod)
	l.ask(ctx, false)
}

// rollDriverReady: the driver answered Probe ready.
func (l *loop) rollDriverReady() {
	m := l.roll
	l.log.Debug("driver health", "ready", true, "was", m.health.String())
	switch m.health {
	case healthUnknown:
		m.health = healthReady
		l.modeEvent(modeEvent{kind: evDriverReady})
	case healthDown:
		m.health = healthRecovering
		m.stable.set(driverStableWindow)
		l.log.Info("the driver answers Probe ready again; this instance claims the registration again once it stays ready",
			"stableWindow", driverStableWindow)
	}
}

// rollDriverDown: the driver did not answer Probe, said not ready, or its
// socket went. A driver never ready yet stays unknown: the instance has
// not claimed anything.
func (l *loop) rollDriverDown(err error) {
	m := l.roll
	l.log.Debug("driver health", "ready", false, "was", m.health.String(), "err", errText(err))
	if m.health == healthUnknown || m.health == healthDown {
		return
	}
	m.health = healthDown
	m.stable.stop()
	l.roll.self.update(func(st *InstanceState) { st.DriverDown = true })
	l.decision(decisionDriverDown, "the driver stopped answering Probe: published, no claim on the registration while another instance may hold it",
		"err", errText(err))
	l.modeEvent(modeEvent{kind: evDriverDown})
}

// onDriverStable: the driver has been ready for driverStableWindow.
func (l *loop) onDriverStable() {
	m := l.roll
	m.stable.stop()
	if m.health != healthRecovering {
		return
	}
	m.health = healthReady
	l.roll.self.update(func(st *InstanceState) { st.DriverDown = false })
	l.log.Info("the driver has been ready for the stable window", "stableWindow", driverStableWindow)
	l.modeEvent(modeEvent{kind: evDriverStable})
}

// publishFallback publishes Status.Fallback (isFallback) when it changed.
func (l *loop) publishFallback() {
	self, _ := l.roll.self.get()
	fb := isFallback(l.stage, self, l.roll.driverUnready(), l.roll.yielded)
	if l.r.status.get().Fallback != fb {
		l.r.status.update(func(st *Status) { st.Fallback = fb })
	}
}

// isFallback reports whether an instance at stage is a usable fallback
// (Status.Fallback): standing by, with an announcement the kubelet
// confirmed, not terminating, its driver ready (not down, not recovering),
// and not yielding to a registrar without the mode at the plain path: it takes the registration back at once if the newer
// instance's driver stops answering, so its pod stays Ready (/readyz) and
// the DaemonSet keeps it beside the new one.
func isFallback(stage Stage, self InstanceState, driverUnready, yielded bool) bool {
	return stage == StageStandingBy && self.Confirmed && !self.Terminating && !driverUnready && !yielded
}
