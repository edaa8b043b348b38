//go:build worker

package main

import "errors"

// embeddedAvailable is false in worker builds: they carry no Temporal server.
const embeddedAvailable = false

type embeddedServer struct{}

func startEmbedded(dbFile, namespace string, system bool, port int) (*embeddedServer, error) {
	return nil, errors.New("this ndtrace was built for workers, without the embedded Temporal server: give --temporal HOST:PORT")
}

func (e *embeddedServer) Addr() string { return "" }
func (e *embeddedServer) Stop()        {}

func startEmbeddedOn(ip, dbFile, namespace string, system bool, port int) (*embeddedServer, error) {
	return startEmbedded(dbFile, namespace, system, port)
}

func startWebUI(ip string, port int, frontend, namespace string) (stop func(), err error) {
	return nil, errors.New("this ndtrace was built for workers, without the Temporal Web UI")
}
