package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podhealth/podhealth/podsource"
	"github.com/podhealth/podhealth/podsource/kube"
)

// TestValidateScopeRefusesWhatTheConstructorsRefuse holds ValidateScope to
// the constructors' own rules, case by case, so that other bindings that
// call it refuse exactly the same scopes.
func TestValidateScopeRefusesWhatTheConstructorsRefuse(t *testing.T) {
	workload := labels.SelectorFromSet(labels.Set{"app": "registry"})
	cases := map[string]struct {
		namespace string
		selector  labels.Selector
	}{
		"workload selector":    {"default", workload},
		"whole namespace":      {"default", podsource.WholeNamespace()},
		"nil selector":         {"default", nil},
		"empty namespace":      {"", workload},
		"invalid namespace":    {"Not_A_Label", workload},
		"everything":           {"default", labels.Everything()},
		"nothing":              {"default", labels.Nothing()},
		"parsed empty":         {"default", labels.NewSelector()},
		"stripped whole ns":    {"default", podsource.WholeNamespace().DeepCopySelector()},
		"nil and no namespace": {"", nil},
	}
	for name, sel := range selectorsOfEveryPod(t) {
		cases["every pod: "+name] = struct {
			namespace string
			selector  labels.Selector
		}{"default", sel}
	}
	client := fake.NewClientset()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ctorErr := kube.NewDeleter(client.CoreV1(), tc.namespace, kube.DeleterOptions{Selector: tc.selector})
			err := podsource.ValidateScope(tc.namespace, tc.selector)
			require.Equal(t, ctorErr == nil, err == nil, "ValidateScope: %v; NewDeleter: %v", err, ctorErr)
			accepted := name == "workload selector" || name == "whole namespace"
			require.Equal(t, accepted, err == nil, "ValidateScope(%q, %v): %v", tc.namespace, tc.selector, err)
		})
	}
}
