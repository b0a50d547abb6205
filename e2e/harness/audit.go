package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// auditPolicy records every DELETE of a pod with its request body (the
// DeleteOptions), and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["delete"]
  resources: [{group: "", resources: ["pods"]}]
- level: None
`

// auditArgs writes the audit policy into dir and returns the API server
// flags that write the audit log there.
func auditArgs(dir string) ([]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
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
	// At is when the API server received the request.
	At        time.Time
	UserAgent string
	Namespace string
	Name      string
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

// auditEvent is the part of an audit.k8s.io/v1 Event that PodDeletes reads.
type auditEvent struct {
	Stage                    string    `json:"stage"`
	UserAgent                string    `json:"userAgent"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	ObjectRef                struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
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
	if cp.auditLog == "" {
		return nil, errors.New("harness: PodDeletes needs Options.AuditPodDeletes")
	}
	f, err := os.Open(cp.auditLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []PodDelete
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		var e auditEvent
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			// The API server may be writing the last line right now.
			continue
		}
		if e.Stage != "ResponseComplete" {
			continue
		}
		d := PodDelete{At: e.RequestReceivedTimestamp, UserAgent: e.UserAgent, Namespace: e.ObjectRef.Namespace,
			Name: e.ObjectRef.Name, Code: e.ResponseStatus.Code}
		if o := e.RequestObject; o != nil {
			d.GracePeriodSeconds = o.GracePeriodSeconds
			if o.Preconditions != nil && o.Preconditions.UID != nil {
				d.PreconditionUID = *o.Preconditions.UID
			}
		}
		out = append(out, d)
	}
	if err := scanner.Err(); err != nil {
		return out, fmt.Errorf("harness: reading the audit log: %w", err)
	}
	return out, nil
}
