package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"github.com/ndtrace/ndtrace/internal/userdirs"
)

// defaultServerDB is where "ndtrace server" keeps Temporal's state unless --db says otherwise:
// temporal.db in the user's state folder (userdirs.StateDir: $NDTRACE_STATE, else ndtrace/state in
// the user's cache directory, $XDG_CACHE_HOME or ~/.cache on Linux, else a folder of the uid's own
// under /var/tmp). It is state a person can delete (with the server stopped): results live in the
// datasets, not in Temporal.
func defaultServerDB() string {
	dir, err := userdirs.StateDir()
	if err != nil {
		return "temporal.db" // --help still prints; starting says what failed when it opens the file
	}
	return filepath.Join(dir, "temporal.db")
}

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("server", "[--db FILE] [--port 7233] [--ui-port 8233] [--ip 127.0.0.1] [--worker [worker flags]]", stderr)
	var (
		db, ip, namespace string
		port, uiPort      int
		headless, withWkr bool
		wf                workerFlags
		sf                sandboxFlags
	)
	fs.StringVar(&db, "db", defaultServerDB(), "SQLite file of Temporal's state (workflows, histories, schedules); created if missing, kept across restarts")
	fs.IntVar(&port, "port", 7233, "port of the Temporal frontend (what --temporal of submit, status, cancel, schedule and worker name)")
	fs.IntVar(&uiPort, "ui-port", 8233, "port of the Temporal Web UI")
	fs.StringVar(&ip, "ip", "127.0.0.1", "address the frontend and the Web UI listen on (0.0.0.0: every address; there is no authentication)")
	fs.StringVar(&namespace, "namespace", "default", "Temporal namespace to create (if missing) and open the Web UI on")
	fs.BoolVar(&headless, "headless", false, "start no Web UI")
	fs.BoolVar(&withWkr, "worker", false, "also run a worker in this process (the worker flags below apply), so that one command serves one machine")
	wf.register(fs)
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if !embeddedAvailable {
		return usagef("this build has no embedded Temporal server (it was built with the worker tag)")
	}
	if net.ParseIP(ip) == nil {
		return usagef("--ip %q: not an IP address", ip)
	}
	if port < 1 || port > 65535 || uiPort < 1 || uiPort > 65535 {
		return usagef("--port and --ui-port must be between 1 and 65535")
	}
	if port == uiPort && !headless {
		return usagef("--port and --ui-port must differ")
	}
	if db == "" {
		return usagef("--db must name a file")
	}
	if withWkr {
		if _, err := checkWorkerFlags(wf); err != nil {
			return err
		}
		if _, err := sf.config(); err != nil {
			return err
		}
	}
	// The server gives no readable error for a port in use: check first.
	if err := portFree(net.JoinHostPort(ip, fmt.Sprint(port))); err != nil {
		return fmt.Errorf("--port: %w (is another Temporal server running?)", err)
	}
	if !headless {
		if err := portFree(net.JoinHostPort(ip, fmt.Sprint(uiPort))); err != nil {
			return fmt.Errorf("--ui-port: %w", err)
		}
	}

	// The worker service runs Temporal's system workflows: Schedules and the scavengers that keep
	// a long-lived database tidy.
	srv, err := startEmbeddedOn(ip, db, namespace, true, port)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(stdout, "Temporal server at %s, namespace %s, state in %s\n", srv.Addr(), namespace, db)
	if dialHost(ip) != ip {
		fmt.Fprintf(stdout, "listening on every address of this machine (--ip %s), without authentication\n", ip)
	}
	if !headless {
		stopUI, err := startWebUI(ip, uiPort, srv.Addr(), namespace)
		if err != nil {
			return err
		}
		defer stopUI()
		fmt.Fprintf(stdout, "Temporal Web UI at http://%s/namespaces/%s/workflows\n", net.JoinHostPort(dialHost(ip), fmt.Sprint(uiPort)), namespace)
	}
	if withWkr {
		tf := temporalFlags{addr: srv.Addr(), namespace: namespace}
		c, err := tf.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		stop, err := startWorkers(ctx, c, wf, sf)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(stdout, "worker serving %s in this process\n", wf.queues)
	} else {
		fmt.Fprintf(stdout, "no worker in this process: ndtrace worker --temporal %s runs one\n", srv.Addr())
	}
	fmt.Fprintf(stdout, "ndtrace submit --spec FILE --temporal %s starts a dataset; Ctrl-C stops the server\n", srv.Addr())
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	return nil
}

// dialHost is the address this machine reaches a server listening on ip at: ip itself, or
// 127.0.0.1 for a server listening on every address.
func dialHost(ip string) string {
	if a := net.ParseIP(ip); a != nil && a.IsUnspecified() {
		return "127.0.0.1"
	}
	return ip
}

// portFree checks that addr (HOST:PORT) can be listened on.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	return l.Close()
}
