package registrar

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registrar's Prometheus series. Each Registrar has its own
// registry, so several can live in one process.
type metrics struct {
	registry        *prometheus.Registry
	stage           *prometheus.GaugeVec
	notifications   *prometheus.CounterVec
	socketCreations *prometheus.CounterVec
	getInfo         prometheus.Counter
	driverReachable prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		stage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "csi_registrar_registration_stage",
			Help: "1 for the registrar's current registration stage, 0 for the others.",
		}, []string{"stage"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "csi_registrar_kubelet_notifications_total",
			Help: "NotifyRegistrationStatus calls from the kubelet, by outcome (registered or rejected).",
		}, []string{"outcome"}),
		socketCreations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "csi_registrar_socket_creations_total",
			Help: "Registration sockets created, by reason (start, deleted, rejected, kubelet-silent, conflict, driver-renamed).",
		}, []string{"reason"}),
		getInfo: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "csi_registrar_getinfo_calls_total",
			Help: "GetInfo calls from the kubelet's plugin watcher.",
		}),
		driverReachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "csi_registrar_driver_reachable",
			Help: "1 if the CSI driver answered its last Probe or GetPluginInfo, 0 otherwise.",
		}),
	}
	m.registry.MustRegister(m.stage, m.notifications, m.socketCreations, m.getInfo, m.driverReachable)
	for _, s := range allStages {
		m.stage.WithLabelValues(s.String()).Set(0)
	}
	for _, o := range []string{"registered", "rejected"} {
		m.notifications.WithLabelValues(o)
	}
	return m
}

func (m *metrics) setStage(s Stage) {
	for _, x := range allStages {
		v := 0.0
		if x == s {
			v = 1
		}
		m.stage.WithLabelValues(x.String()).Set(v)
	}
}

func (m *metrics) setReachable(ok bool) {
	if ok {
		m.driverReachable.Set(1)
	} else {
		m.driverReachable.Set(0)
	}
}
