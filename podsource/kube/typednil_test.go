package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource/fake"
	"github.com/podhealth/podhealth/podsource/kube"
)

// health.New refuses each of this package's types as a typed nil pointer,
// what its constructor returns on error when the caller ignored the error,
// instead of panicking later inside a check.
func TestHealthNewRefusesTheKubeTypesAsTypedNils(t *testing.T) {
	pods := fake.New(fake.Options{})
	tests := []struct {
		name    string
		source  health.PodSource
		deleter health.Deleter
		opts    health.Options
		want    string
	}{
		{"PodSource (*kube.ListerSource)(nil)", (*kube.ListerSource)(nil), pods, health.Options{}, "nil PodSource"},
		{"PodSource (*kube.ClientSource)(nil)", (*kube.ClientSource)(nil), pods, health.Options{}, "nil PodSource"},
		{"Deleter (*kube.Deleter)(nil)", pods, (*kube.Deleter)(nil), health.Options{}, "nil Deleter"},
		{"Options.Nodes (*kube.NodeSource)(nil)", pods, pods, health.Options{Nodes: (*kube.NodeSource)(nil)}, "Options.Nodes"},
		{"Options.LiveNodes (*kube.LiveNodes)(nil)", pods, pods, health.Options{LiveNodes: (*kube.LiveNodes)(nil)}, "Options.LiveNodes"},
		{"Options.Claims (*kube.ClaimSource)(nil)", pods, pods, health.Options{Claims: (*kube.ClaimSource)(nil)}, "Options.Claims"},
		{"Options.Observer (*kube.EventObserver)(nil)", pods, pods, health.Options{Observer: (*kube.EventObserver)(nil)}, "Options.Observer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checker *health.Checker
			var err error
			require.NotPanics(t, func() { checker, err = health.New(tt.source, tt.deleter, tt.opts) })
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, checker)
		})
	}
}
