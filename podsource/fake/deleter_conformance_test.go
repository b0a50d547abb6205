package fake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podhealth/podhealth/health"
	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/fake"
)

func TestPodsPassesTheDeleterConformanceSuite(t *testing.T) {
	err := podsource.TestDeleter(func(pods ...*corev1.Pod) (health.Deleter, podsource.GetPodFunc, error) {
		f := fake.New(fake.Options{ListLag: 1}, pods...)
		return f, func(_ context.Context, namespace, name string) (*corev1.Pod, error) { return f.Get(namespace, name) }, nil
	})
	require.NoError(t, err)
}
