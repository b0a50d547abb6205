package registry_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podhealth/podhealth/internal/registry"
)

type key struct {
	client any
	n      int
}

type withMap struct{ m map[string]int }

func TestGetMakesStateOncePerKeyAndForgetsTheOldestPastItsCapacity(t *testing.T) {
	var r registry.Registry[key, *int]
	made := 0
	build := func() (*int, error) { made++; v := made; return &v, nil }
	client := &struct{ name string }{"a"}
	first, err := r.Get(key{client: client}, build)
	require.NoError(t, err)
	again, err := r.Get(key{client: client}, build)
	require.NoError(t, err)
	require.Same(t, first, again, "one key, one state")
	require.Equal(t, 1, made)

	for i := range registry.DefaultCapacity {
		_, err := r.Get(key{n: i + 1}, build)
		require.NoError(t, err)
	}
	require.Equal(t, registry.DefaultCapacity, r.Len(), "bounded")
	anew, err := r.Get(key{client: client}, build)
	require.NoError(t, err)
	require.NotSame(t, first, anew, "the oldest key was forgotten for room")
}

func TestGetRefusesAKeyThatCannotBeComparedAndKeepsNoFailedState(t *testing.T) {
	var r registry.Registry[key, int]
	_, err := r.Get(key{client: withMap{m: map[string]int{}}}, func() (int, error) { return 1, nil })
	require.ErrorContains(t, err, "a registry_test.key cannot be told apart from another: it holds a map[string]int")
	boom := errors.New("boom")
	_, err = r.Get(key{n: 1}, func() (int, error) { return 0, boom })
	require.ErrorIs(t, err, boom)
	require.Zero(t, r.Len())
	v, err := r.Get(key{n: 1}, func() (int, error) { return 7, nil })
	require.NoError(t, err)
	require.Equal(t, 7, v, "a failed make is tried again")
	require.NoError(t, registry.Comparable(key{client: fmt.Stringer(nil)}))
}
