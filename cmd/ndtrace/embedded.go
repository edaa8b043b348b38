//go:build !worker

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	otelresource "go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.10.0"
	"go.uber.org/fx"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/headers"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/telemetry"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// embeddedAvailable reports whether this binary carries the embedded Temporal server (builds with
// the "worker" tag do not, to keep worker images small).
const embeddedAvailable = true

// embeddedServer is a Temporal server running inside this process.
type embeddedServer struct {
	srv  temporal.Server
	addr string
}

// startEmbedded starts the Temporal services in-process on 127.0.0.1, persisting to a SQLite file
// (dbFile) or to memory (dbFile ""). Static hosts instead of ringpop membership make restarts on a
// file database fast; the version check that calls home is off.
//
// The frontend, history and matching services run everything a dataset needs (workflows, child
// workflows, activities, continue-as-new). The worker service runs Temporal's own system workflows:
// Schedules, batch operations, namespace deletion and the scavengers that maintain a long-lived
// database. It starts only when system is true: it costs about half a second at start (it hashes
// the executable to name its SDK worker) and a second at stop (the frontend waits out its long
// polls), which a server that lives for one in-memory run never needs.
func startEmbedded(dbFile, namespace string, system bool, port int) (*embeddedServer, error) {
	return startEmbeddedOn("127.0.0.1", dbFile, namespace, system, port)
}

// startEmbeddedOn is startEmbedded with the frontend listening on ip (an address of this machine,
// or 0.0.0.0 / :: for all of them); the history, matching and worker services, which only the
// frontend and each other call, stay on 127.0.0.1.
func startEmbeddedOn(ip, dbFile, namespace string, system bool, port int) (*embeddedServer, error) {
	const host = "127.0.0.1"
	if net.ParseIP(ip) == nil {
		return nil, fmt.Errorf("temporal frontend: %q is not an IP address", ip)
	}
	feIP, feHost := ip, dialHost(ip) // where the frontend listens, and where this machine reaches it
	sql := &config.SQL{PluginName: sqliteplugin.PluginName, ConnectAttributes: map[string]string{}}
	if dbFile == "" {
		sql.DatabaseName = fmt.Sprintf("ndtrace-%d", time.Now().UnixNano())
		sql.ConnectAttributes["mode"], sql.ConnectAttributes["cache"] = "memory", "shared"
	} else {
		if err := os.MkdirAll(filepath.Dir(dbFile), 0o755); err != nil {
			return nil, fmt.Errorf("temporal database: %w", err)
		}
		sql.DatabaseName = dbFile
		sql.ConnectAttributes["mode"], sql.ConnectAttributes["journal_mode"], sql.ConnectAttributes["busy_timeout"] = "rwc", "wal", "10000"
		if _, err := os.Stat(dbFile); os.IsNotExist(err) {
			if err := sqliteschema.SetupSchema(sql); err != nil {
				return nil, fmt.Errorf("temporal database schema: %w", err)
			}
		}
	}
	var ports [4]int
	for i := range ports {
		if i == 0 && port > 0 {
			ports[0] = port // the frontend, where workers of other processes connect
			continue
		}
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	svc := func(p int) config.Service { return config.Service{RPC: config.RPC{GRPCPort: p, BindOnIP: host}} }
	hp := func(p int) static.Hosts { return static.SingleLocalHost(net.JoinHostPort(host, fmt.Sprint(p))) }
	fe := net.JoinHostPort(feHost, fmt.Sprint(ports[0]))
	cfg := &config.Config{
		Global: config.Global{Membership: config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host}},
		Persistence: config.Persistence{DefaultStore: "sqlite", VisibilityStore: "sqlite", NumHistoryShards: 1,
			DataStores: map[string]config.DataStore{"sqlite": {SQL: sql}}},
		ClusterMetadata: &cluster.Config{FailoverVersionIncrement: 10, MasterClusterName: "active", CurrentClusterName: "active",
			ClusterInformation: map[string]cluster.ClusterInformation{"active": {Enabled: true, InitialFailoverVersion: 1, RPCAddress: fe}}},
		DCRedirectionPolicy: config.DCRedirectionPolicy{Policy: "noop"},
		Services: map[string]config.Service{"frontend": {RPC: config.RPC{GRPCPort: ports[0], BindOnIP: feIP}}, "history": svc(ports[1]),
			"matching": svc(ports[2]), "worker": svc(ports[3])},
		Archival: config.Archival{History: config.HistoryArchival{State: "disabled"}, Visibility: config.VisibilityArchival{State: "disabled"}},
		NamespaceDefaults: config.NamespaceDefaults{Archival: config.ArchivalNamespaceDefaults{
			History:    config.HistoryArchivalNamespaceDefaults{State: "disabled"},
			Visibility: config.VisibilityArchivalNamespaceDefaults{State: "disabled"}}},
		PublicClient: config.PublicClient{HostPort: fe},
	}
	nsCfg, err := sqliteschema.NewNamespaceConfig("active", namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("temporal namespace: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(sql, nsCfg); err != nil {
		return nil, fmt.Errorf("temporal namespace: %w", err)
	}
	withoutProcessOwner.Do(func() {
		temporal.ServiceTracingModule = fx.Options(temporal.ServiceTracingModule, fx.Decorate(serviceResource))
	})
	services := []string{string(primitives.FrontendService), string(primitives.HistoryService), string(primitives.MatchingService)}
	if system {
		services = append(services, string(primitives.WorkerService))
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(cfg),
		temporal.ForServices(services),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(fe), primitives.HistoryService: hp(ports[1]),
			primitives.MatchingService: hp(ports[2]), primitives.WorkerService: hp(ports[3])}),
		temporal.WithLogger(log.NewNoopLogger()),
		temporal.WithDynamicConfigClient(embeddedDynamicConfig()),
	)
	if err != nil {
		return nil, embeddedError(fmt.Errorf("temporal server: %w", err))
	}
	if err := srv.Start(); err != nil {
		return nil, embeddedError(fmt.Errorf("start temporal server: %w", err))
	}
	return &embeddedServer{srv: srv, addr: fe}, nil
}

var withoutProcessOwner sync.Once

// embeddedError shortens a failure of the embedded server to its root cause: Temporal's
// dependency injection wraps it in a chain of every constructor on the way (thousands of
// characters), which debug logging still shows.
func embeddedError(err error) error {
	root := err
	for u := errors.Unwrap(root); u != nil; u = errors.Unwrap(root) {
		root = u
	}
	return &hintError{msg: fmt.Sprintf("the embedded Temporal server did not start: %v (NDTRACE_LOG=debug logs the whole error; --temporal HOST:PORT uses a server of your own)", root), err: err}
}

// serviceResource is the OpenTelemetry resource of one of the embedded server's services: what
// Temporal makes (ServiceTracingModule documents it as replaceable), without the process.owner
// attribute. Its detector calls os/user.Current, which fails under a uid with no passwd entry
// (containers run as such uids), and Temporal then refuses to start: "user: unknown userid".
// The resource only labels exported spans, and the embedded server exports none unless
// OTEL_TRACES_EXPORTER is set.
func serviceResource(rsn primitives.ServiceName) (*otelresource.Resource, error) {
	return otelresource.New(context.Background(),
		otelresource.WithProcessPID(),
		otelresource.WithProcessExecutableName(),
		otelresource.WithProcessExecutablePath(),
		otelresource.WithProcessCommandArgs(),
		otelresource.WithProcessRuntimeName(),
		otelresource.WithProcessRuntimeVersion(),
		otelresource.WithProcessRuntimeDescription(),
		otelresource.WithOS(),
		otelresource.WithHost(),
		otelresource.WithContainer(),
		otelresource.WithAttributes(
			semconv.ServiceNameKey.String(telemetry.ResourceServiceName(rsn, os.LookupEnv)),
			semconv.ServiceVersionKey.String(headers.ServerVersion)),
	)
}

// embeddedTaskWorkers is the number of goroutines each of the embedded server's history task
// schedulers runs. The server's defaults (512 for each of timer, transfer, visibility, archival and
// replication tasks, 128 for low-priority replication) are sized for a cluster's history hosts and
// cost one machine about 2,900 idle goroutines and 16 MiB of stacks; one machine's workers dispatch
// far fewer tasks at once than this.
const embeddedTaskWorkers = 16

// embeddedDynamicConfig is the embedded server's dynamic configuration: no version check (no
// network), and task schedulers and task queues sized for one machine.
func embeddedDynamicConfig() dynamicconfig.StaticClient {
	v := func(x any) []dynamicconfig.ConstrainedValue { return []dynamicconfig.ConstrainedValue{{Value: x}} }
	return dynamicconfig.StaticClient{
		dynamicconfig.EnableServerVersionCheck.Key():                            v(false),
		dynamicconfig.TimerProcessorSchedulerWorkerCount.Key():                  v(embeddedTaskWorkers),
		dynamicconfig.MemoryTimerProcessorSchedulerWorkerCount.Key():            v(embeddedTaskWorkers),
		dynamicconfig.TransferProcessorSchedulerWorkerCount.Key():               v(embeddedTaskWorkers),
		dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key():             v(embeddedTaskWorkers),
		dynamicconfig.ArchivalProcessorSchedulerWorkerCount.Key():               v(embeddedTaskWorkers),
		dynamicconfig.ReplicationProcessorSchedulerWorkerCount.Key():            v(1),
		dynamicconfig.ReplicationLowPriorityProcessorSchedulerWorkerCount.Key(): v(1),
		// One partition per task queue: partitions spread a busy queue over matching hosts, and
		// one machine has one. Each loaded partition costs goroutines for its reader, writer,
		// sync and metrics loops.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  v(1),
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): v(1),
	}
}

func (e *embeddedServer) Addr() string { return e.addr }
func (e *embeddedServer) Stop()        { _ = e.srv.Stop() }

// startWebUI serves Temporal's Web UI (the ui-server module with its embedded assets) on
// http://ip:port/ for the frontend at frontend, opening on namespace. The UI makes no calls of its
// own beyond the frontend: no news feed, no version check. It returns once the UI answers; stop
// closes it.
func startWebUI(ip string, port int, frontend, namespace string) (stop func(), err error) {
	addr := net.JoinHostPort(ip, fmt.Sprint(port))
	// The UI server exits the process when it cannot listen: find out first.
	if err := portFree(addr); err != nil {
		return nil, err
	}
	s := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host: ip, Port: port, TemporalGRPCAddress: frontend, DefaultNamespace: namespace,
		EnableUI: true, HideLogs: true, DisableNewsFetch: true,
		// Plain HTTP on this machine: the CSRF cookie must not require HTTPS.
		CORS: uiconfig.CORS{CookieInsecure: true},
		// The UI reads its config at every request; nothing here changes.
		RefreshInterval: time.Hour,
	}))
	done := make(chan error, 1)
	go func() { done <- s.Start() }()
	health := "http://" + net.JoinHostPort(dialHost(ip), fmt.Sprint(port)) + "/healthz"
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := hc.Get(health); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			return nil, fmt.Errorf("temporal web UI on %s: stopped at start: %v", addr, err)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("temporal web UI on %s: no answer at %s after 30s", addr, health)
		}
	}
	return func() {
		s.Stop()
		<-done
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
