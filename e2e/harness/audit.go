package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// auditPolicy records every DELETE of a pod with its request body (the
// DeleteOptions), the metadata of every request of the users in requesters
// and of every write of the users in writers, and nothing else.
func auditPolicy(writers, requesters []string) string {
	policy := `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["delete"]
  resources: [{group: "", resources: ["pods"]}]
`
	if len(requesters) > 0 {
		policy += "- level: Metadata\n  users: [" + quoteAll(requesters) + "]\n"
	}
	if len(writers) > 0 {
		policy += "- level: Metadata\n  users: [" + quoteAll(writers) + "]\n  verbs: [\"create\", \"update\", \"patch\", \"delete\", \"deletecollection\"]\n"
	}
	return policy + "- level: None\n"
}

func quoteAll(users []string) string {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return strings.Join(quoted, ", ")
}

// auditArgs writes the audit policy into dir and returns the API server
// flags that write the audit log there.
func auditArgs(dir string, writers, requesters []string) ([]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy(writers, requesters)), 0o600); err != nil {
		return nil, "", err
	}
	log := filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
	}, log, nil
}

// PodDelete is one DELETE of a pod that the API server answered, from its
// audit log.
type PodDelete struct {
	// At is when the API server received the request; Answered, when it
	// answered it (for a DELETE that removed the pod, when it was gone).
	At, Answered time.Time
	UserAgent    string
	Namespace    string
	Name         string
	// Code is the HTTP status of the answer.
	Code int
	// GracePeriodSeconds is the request's grace period; nil when it set
	// none.
	GracePeriodSeconds *int64
	// PreconditionUID is the UID the request required, or empty.
	PreconditionUID types.UID
}

// Force reports whether the request asked for grace period 0.
func (d PodDelete) Force() bool { return d.GracePeriodSeconds != nil && *d.GracePeriodSeconds == 0 }

// Write is one write request of an audited user (Options.AuditWritesBy)
// that the API server answered.
type Write struct {
	At              time.Time
	User, UserAgent string
	Verb            string
	Resource        string // with "/subresource" for a subresource
	Namespace, Name string
	Code            int
}

// auditEvent is the part of an audit.k8s.io/v1 Event that PodDeletes and
// Writes read.
type auditEvent struct {
	Stage string `json:"stage"`
	Level string `json:"level"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent                string    `json:"userAgent"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	ObjectRef                struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject *struct {
		GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
		Preconditions      *struct {
			UID *types.UID `json:"uid"`
		} `json:"preconditions"`
	} `json:"requestObject"`
}

// PodDeletes returns every DELETE of a pod the API server has answered so
// far, in the order it logged them, across restarts. It needs
// Options.AuditPodDeletes.
func (cp *ControlPlane) PodDeletes() ([]PodDelete, error) {
	events, err := cp.auditEvents()
	var out []PodDelete
	for _, e := range events {
		if e.Verb == "delete" && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" && e.requestLevel() {
			d := PodDelete{At: e.RequestReceivedTimestamp, Answered: e.StageTimestamp, UserAgent: e.UserAgent, Namespace: e.ObjectRef.Namespace,
				Name: e.ObjectRef.Name, Code: e.ResponseStatus.Code}
			if o := e.RequestObject; o != nil {
				d.GracePeriodSeconds = o.GracePeriodSeconds
				if o.Preconditions != nil && o.Preconditions.UID != nil {
					d.PreconditionUID = *o.Preconditions.UID
				}
			}
			out = append(out, d)
		}
	}
	return out, err
}

// PodDeletesWhen reads the audit log until done accepts the pod DELETEs it
// holds, or until ctx ends or 10 s pass, and returns the last read. The API
// server logs a request after it answers it, so a watch can see a pod gone
// before its DELETE is in the log.
func (cp *ControlPlane) PodDeletesWhen(ctx context.Context, done func([]PodDelete) bool) ([]PodDelete, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		deletes, err := cp.PodDeletes()
		if err != nil || done(deletes) {
			return deletes, err
		}
		select {
		case <-ctx.Done():
			return deletes, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Writes returns every write of the users in Options.AuditWritesBy that
// the API server has answered so far, in the order it logged them.
func (cp *ControlPlane) Writes() ([]Write, error) {
	events, err := cp.auditEvents()
	var out []Write
	for _, e := range events {
		if !cp.auditedWriter(e.User.Username) {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		out = append(out, Write{At: e.RequestReceivedTimestamp, User: e.User.Username, UserAgent: e.UserAgent, Verb: e.Verb,
			Resource: resource, Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name, Code: e.ResponseStatus.Code})
	}
	return out, err
}

// AuditedRequest is one request of a user in Options.AuditRequestsBy.
type AuditedRequest struct {
	At       time.Time
	User     string
	Verb     string // get, list, watch, create, update, patch, delete...
	Resource string // with "/subresource" for a subresource
	Code     int    // the HTTP status; a watch's as it started
}

// AuditedRequests returns every request of the users in
// Options.AuditRequestsBy that the API server has answered so far, watches
// from when their answer started, in the order it logged them.
func (cp *ControlPlane) AuditedRequests() ([]AuditedRequest, error) {
	events, err := cp.auditEventsAt("ResponseComplete", "ResponseStarted")
	var out []AuditedRequest
	for _, e := range events {
		if !slices.Contains(cp.opts.AuditRequestsBy, e.User.Username) {
			continue
		}
		// A watch is logged when it starts and again when it ends, any
		// other request once, when it completes.
		if (e.Verb == "watch") != (e.Stage == "ResponseStarted") {
			continue
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		out = append(out, AuditedRequest{At: e.RequestReceivedTimestamp, User: e.User.Username, Verb: e.Verb, Resource: resource, Code: e.ResponseStatus.Code})
	}
	return out, err
}

func (cp *ControlPlane) auditedWriter(user string) bool {
	for _, w := range cp.opts.AuditWritesBy {
		if w == user {
			return true
		}
	}
	return false
}

// requestLevel reports whether the event was logged at level Request: every
// pod DELETE is, and carries its DeleteOptions when the client sent any.
func (e auditEvent) requestLevel() bool { return e.Level == "Request" }

// auditEvents reads the ResponseComplete events of the audit log.
func (cp *ControlPlane) auditEvents() ([]auditEvent, error) {
	return cp.auditEventsAt("ResponseComplete")
}

// auditEventsAt reads the events of the audit log at the given stages.
func (cp *ControlPlane) auditEventsAt(stages ...string) ([]auditEvent, error) {
	if cp.auditLog == "" {
		return nil, errors.New("harness: the audit log needs Options.AuditPodDeletes or Options.AuditWritesBy")
	}
	f, err := os.Open(cp.auditLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditEvent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			// The API server may be writing the last line right now.
			continue
		}
		if slices.Contains(stages, e.Stage) {
			out = append(out, e)
		}
	}
	if err := scanner.Err(); err != nil {
		return out, fmt.Errorf("harness: reading the audit log: %w", err)
	}
	return out, nil
}
