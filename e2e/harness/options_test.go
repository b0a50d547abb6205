package harness

import (
	"testing"
	"time"
)

// Start and StartStandalone fill in the same defaults: every field whose
// zero value means a default has it. StartStandalone once left the nodes'
// Lease duration at zero, so that the demo stopped at its first node
// ("spec.leaseDurationSeconds: Invalid value: 0").
func TestStartAndStartStandaloneShareEveryDefault(t *testing.T) {
	got := Options{}.withDefaults()
	for name, v := range map[string]time.Duration{
		"StartTimeout":      got.StartTimeout,
		"HeartbeatInterval": got.HeartbeatInterval,
		"NodeLeaseDuration": got.NodeLeaseDuration,
	} {
		if v <= 0 {
			t.Errorf("Options{}.withDefaults().%s = %v, want a default", name, v)
		}
	}
	if got.LogTailLines <= 0 {
		t.Errorf("LogTailLines = %d, want a default", got.LogTailLines)
	}
	set := Options{HeartbeatInterval: 5 * time.Second, NodeLeaseDuration: time.Minute}.withDefaults()
	if set.HeartbeatInterval != 5*time.Second || set.NodeLeaseDuration != time.Minute {
		t.Errorf("given values were overridden: %+v", set)
	}
}
