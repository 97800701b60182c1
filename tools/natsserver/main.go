// Command natsserver runs a NATS server with JetStream for adhost hosts
// sharing durable state ([store] backend = "jetstream"), built from the
// nats-server module this repository already pins, so `make run-cluster`
// needs nothing installed.
//
//	natsserver -listen 127.0.0.1:4222 -store data/nats
//
// It is a development server: one node, no authentication, loopback by
// default. Writes are synced to disk before they are acknowledged
// (sync_interval "always"), so a kill -9 of this server loses nothing
// acknowledged; production deployments run a NATS cluster (replicas 3)
// configured by its operators instead.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "natsserver:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("natsserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:4222", "client address host:port")
	store := fs.String("store", "data/nats", "JetStream store directory")
	maxPayload := fs.Int("max_payload", 8<<20, "largest message in bytes (the largest job record, jobs.max_job_bytes)")
	verbose := fs.Bool("v", false, "log the server's notices")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	host, portStr, err := net.SplitHostPort(*listen)
	if err != nil {
		return fmt.Errorf("-listen: %v", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return fmt.Errorf("-listen: port %q", portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT // nats-server reads 0 as its default port
	}
	if err := os.MkdirAll(*store, 0o700); err != nil {
		return fmt.Errorf("-store: %v", err)
	}
	opts := &server.Options{
		ServerName: "adhost-dev",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   *store,
		SyncAlways: true,
		MaxPayload: int32(*maxPayload),
		NoSigs:     true,
		NoLog:      !*verbose,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	if *verbose {
		srv.ConfigureLogger()
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("the server did not become ready")
	}
	// Scripts read this line to learn the address (-listen :0).
	fmt.Fprintf(stdout, "listening on %s\n", srv.ClientURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}
