// Command pgstart is the entrypoint of the e2e suite's PostgreSQL image:
// the small wrapper that docs/safety.md asks of a workload that cannot
// ask before each write. PostgreSQL never asks the sidecar again once it
// runs, so pgstart asks once, before it starts it:
//
//  1. it waits until GET MAY_WRITE_URL (the podhealth-selffence sidecar's
//     endpoint, http://127.0.0.1:8089/may-write by default) answers 200;
//  2. it creates the cluster in PGDATA if there is none (initdb with page
//     checksums), in a directory beside it that it then renames, so that a
//     stop half-way leaves no half-made cluster behind;
//  3. it removes a postmaster.pid that a predecessor left: PostgreSQL's
//     own guard (that file and a shared-memory key) sees only its own PID
//     and IPC namespace, not a server in another pod or on another node,
//     and a stale file whose PID is taken here would keep the server from
//     starting; across nodes, the Lease is the guard;
//  4. it becomes postgres (exec), listening on 127.0.0.1:5432 of the pod's
//     network.
//
// From then on only the sidecar's kill at the deadline, and the kubelet's
// liveness probe of the sidecar's endpoint, stop the server.
//
// ASK_SIDECAR=false is one of the e2e suite's mutations: it skips step 1,
// as a pod that states the protocol with no sidecar to keep it would.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// bin is where the image holds PostgreSQL's programs (Debian's layout).
const bin = "/usr/lib/postgresql/15/bin"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgstart:", err)
		os.Exit(1)
	}
}

func run() error {
	data := os.Getenv("PGDATA")
	if data == "" {
		return errors.New("PGDATA must be set")
	}
	url := os.Getenv("MAY_WRITE_URL")
	if url == "" {
		url = "http://127.0.0.1:8089/may-write"
	}
	// ASK_SIDECAR=false is a mutation of the e2e suite: a pod that states
	// the protocol with no sidecar to keep it.
	if os.Getenv("ASK_SIDECAR") != "false" {
		waited := time.Now()
		waitMayWrite(url)
		fmt.Fprintf(os.Stderr, "pgstart: may write after %v\n", time.Since(waited).Round(time.Millisecond))
	}
	if err := initCluster(data); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(data, "postmaster.pid")); err == nil {
		fmt.Fprintln(os.Stderr, "pgstart: removed a predecessor's postmaster.pid")
	} else if !os.IsNotExist(err) {
		return err
	}
	args := []string{"postgres", "-D", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "port=5432", "-c", "unix_socket_directories=/tmp",
		// Every commit is on disk when it is acknowledged: the history
		// the test checks is of acknowledged commits.
		"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on"}
	return syscall.Exec(filepath.Join(bin, "postgres"), args, os.Environ())
}

// waitMayWrite polls url every 100 ms until it answers 200.
func waitMayWrite(url string) {
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// initCluster creates a cluster in data unless one is there.
func initCluster(data string) error {
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return nil
	}
	fresh := data + ".init"
	if err := os.RemoveAll(fresh); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", fresh, "--data-checksums", "--no-locale",
		"--encoding=UTF8", "--auth=trust", "--username=postgres")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := os.Rename(fresh, data); err != nil {
		return err
	}
	return syncDir(filepath.Dir(data))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
