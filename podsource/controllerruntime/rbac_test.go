package controllerruntime_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	crh "github.com/podhealth/podhealth/podsource/controllerruntime"
)

var markerRE = regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:groups=("?[^,"]*"?),resources=([^,]+),verbs=(\S+)$`)

// markerRules parses the kubebuilder RBAC markers of a Go file.
func markerRules(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	src, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []rbacv1.PolicyRule
	for _, m := range markerRE.FindAllStringSubmatch(string(src), -1) {
		out = append(out, rbacv1.PolicyRule{
			APIGroups: []string{strings.Trim(m[1], `"`)},
			Resources: strings.Split(m[2], ";"),
			Verbs:     strings.Split(m[3], ";"),
		})
	}
	return out
}

func sortRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	sort.Slice(rules, func(i, j int) bool { return rules[i].Resources[0] < rules[j].Resources[0] })
	return rules
}

func TestRBACMarkersAndPolicyRulesAreTheSameRules(t *testing.T) {
	cluster, namespaced := crh.EvidencePolicyRules()
	want := sortRules(append(append(crh.PolicyRules(), cluster...), namespaced...))
	got := sortRules(markerRules(t, "rbac.go"))
	require.Len(t, got, 4, "markers found")
	require.Empty(t, cmp.Diff(want, got))
	// The events go through the events.k8s.io API, not the core one.
	require.Equal(t, []string{"events.k8s.io"}, crh.PolicyRules()[1].APIGroups)
}
