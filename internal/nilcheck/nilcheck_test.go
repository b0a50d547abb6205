package nilcheck_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/nilcheck"
)

type impl struct{}

func (*impl) Do() {}

type doer interface{ Do() }

func TestIsNilTellsTypedNilsFromValues(t *testing.T) {
	var typedNil *impl
	var nilFunc func()
	var nilMap map[string]int
	var iface doer = typedNil
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"typed nil pointer", typedNil, true},
		{"typed nil in an interface", iface, true},
		{"nil func", nilFunc, true},
		{"nil map", nilMap, true},
		{"pointer", &impl{}, false},
		{"func", func() {}, false},
		{"value", 3, false},
		{"struct value", context.Background(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, nilcheck.IsNil(tt.v))
		})
	}
}
