package registrar_test

import (
	"bytes"
	"fmt"
	"log"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/csi-registrar/csi-registrar/registrar"
)

// A program that embeds the registrar and exports its own metrics with
// client_golang adds the registrar's series to its registry through
// WriteMetrics: a GathererFunc parses them, and prometheus.Gatherers merges
// them with the program's own (serve the result with
// promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{})). WriteMetrics
// leaves out the process_* and go_* series, so the program's own process and
// Go collectors do not collide with them.
func ExampleRegistrar_WriteMetrics() {
	r, err := registrar.New(registrar.Options{
		KubeletRegistrationPath: "/var/lib/kubelet/plugins/example.csi.k8s.io/csi.sock",
		Version:                 "v1.0.0",
		Logger:                  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		prometheus.NewCounter(prometheus.CounterOpts{Name: "mydriver_volumes_published_total", Help: "Volumes published."}),
	)
	gatherers := prometheus.Gatherers{reg, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		var b bytes.Buffer
		if err := r.WriteMetrics(&b); err != nil {
			return nil, err
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(&b)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(families))
		for _, f := range families {
			out = append(out, f)
		}
		return out, nil
	})}

	families, err := gatherers.Gather()
	if err != nil {
		log.Fatal(err) // e.g. a series that two sources export
	}
	for _, f := range families {
		if name := f.GetName(); !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			fmt.Println(name)
		}
	}
	// Output:
	// csi_registrar_build_info
	// csi_registrar_driver_reachable
	// csi_registrar_getinfo_calls_total
	// csi_registrar_kubelet_notifications_total
	// csi_registrar_kubelet_retry
	// csi_registrar_registration_stage
	// csi_registrar_socket_creations_total
	// mydriver_volumes_published_total
}
