package leadership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// shutdownTimeout bounds how long a port's hand-over waits for requests in flight (a probe, a
// scrape): each is answered in well under a second.
const shutdownTimeout = 5 * time.Second

// Standby answers the health probes and serves the metrics on core's ports while the process
// waits for the Lease, which is before core's operator exists: without it the kubelet would
// restart a standby whose probes go unanswered, and its leader_election_master_status (0)
// would not be scraped. Each port is handed to core's manager by closing it first, the health
// port before the operator is built (the manager binds it then) and the metrics port right
// before it starts (it binds that one then), so that metrics stay served across the hand-over
// but for a moment.
type Standby struct {
	health, metrics *http.Server
	logger          logr.Logger
}

// ServeStandby binds healthAddr (/healthz and /readyz answer 200: the process is alive and
// competing for the Lease, and a rolling update may count it ready) and metricsAddr (/metrics,
// from gatherer), and serves them until closed. A server that fails is logged to logger: the
// probes going unanswered then restart the process.
func ServeStandby(logger logr.Logger, healthAddr, metricsAddr string, gatherer prometheus.Gatherer) (*Standby, error) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	probes := http.NewServeMux()
	probes.Handle("/healthz", ok)
	probes.Handle("/readyz", ok)
	scrape := http.NewServeMux()
	scrape.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))

	s := &Standby{
		health:  &http.Server{Handler: probes, ReadHeaderTimeout: 10 * time.Second},
		metrics: &http.Server{Handler: scrape, ReadHeaderTimeout: 10 * time.Second},
		logger:  logger,
	}
	hl, err := net.Listen("tcp", healthAddr)
	if err != nil {
		return nil, fmt.Errorf("standby health probes on %s: %w", healthAddr, err)
	}
	ml, err := net.Listen("tcp", metricsAddr)
	if err != nil {
		_ = hl.Close()
		return nil, fmt.Errorf("standby metrics on %s: %w", metricsAddr, err)
	}
	go s.serve(s.health, hl)
	go s.serve(s.metrics, ml)
	return s, nil
}

func (s *Standby) serve(srv *http.Server, l net.Listener) {
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		s.logger.Error(err, "the standby server stopped", "address", l.Addr().String())
	}
}

// ReleaseHealthPort stops answering the probes and frees their port for core's manager.
func (s *Standby) ReleaseHealthPort() error { return release(s.health, "health probe") }

// ReleaseMetricsPort stops serving the metrics and frees their port for core's manager.
func (s *Standby) ReleaseMetricsPort() error { return release(s.metrics, "metrics") }

// Close frees both ports.
func (s *Standby) Close() error {
	return errors.Join(s.ReleaseHealthPort(), s.ReleaseMetricsPort())
}

func release(srv *http.Server, what string) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	// Shutdown closes the listener first, so the port is free once it returns.
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("releasing the standby %s port: %w", what, err)
	}
	return nil
}
