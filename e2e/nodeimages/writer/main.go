// Command writer is the e2e suite's container on real nodes: every
// WRITE_INTERVAL (100ms by default) it appends one line to WRITES_FILE,
//
//	IDENTITY UID SEQUENCE UNIX_NANOSECONDS
//
// so that the file alone shows who wrote to the "volume" and when: a
// writer that runs on a cut-off node keeps writing there. It stops on
// SIGTERM, so a graceful delete is quick.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func run() error {
	path, identity, uid := os.Getenv("WRITES_FILE"), os.Getenv("IDENTITY"), os.Getenv("UID")
	if path == "" || identity == "" || uid == "" {
		return fmt.Errorf("WRITES_FILE, IDENTITY and UID must be set (got %q, %q, %q)", path, identity, uid)
	}
	interval := 100 * time.Millisecond
	if s := os.Getenv("WRITE_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("WRITE_INTERVAL %q: want a positive duration", s)
		}
		interval = d
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		// One write(2) per line: O_APPEND keeps lines of writers on
		// several nodes whole.
		if _, err := fmt.Fprintf(f, "%s %s %d %d\n", identity, uid, seq, time.Now().UnixNano()); err != nil {
			return err
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}
