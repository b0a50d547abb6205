package health

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The node table tells apart names that share their length and their first
// and last eight bytes, names shorter than eight bytes that differ only by
// trailing zero bytes, and holds every name it was given as it grows.
func TestNodeTableTellsApartNamesWithTheSameEnds(t *testing.T) {
	var names []string
	for i := range 300 {
		// Same length, same first and last eight bytes: only the middle
		// differs.
		names = append(names, fmt.Sprintf("ip-10-0-%03d.ec2.internal", i))
	}
	names = append(names, "a", "a\x00", "a\x00\x00", "ab", "worker-1", "worker-10", "w")
	var table nodeTable
	for i, name := range names {
		_, ok := table.gone(name)
		require.False(t, ok, "%q before it was put", name)
		table.put(name, i%3 == 0)
	}
	for i, name := range names {
		gone, ok := table.gone(name)
		require.True(t, ok, "%q after it was put", name)
		require.Equal(t, i%3 == 0, gone, "%q", name)
	}
	for _, absent := range []string{"ip-10-0-300.ec2.internal", "ip-10-0-0001.ec2.internal", "a\x00\x00\x00", "b", "worker-2"} {
		_, ok := table.gone(absent)
		require.False(t, ok, "%q was never put", absent)
	}
	require.Equal(t, len(names), table.used)
	require.LessOrEqual(t, 2*table.used, len(table.slots), "at most half full")

	table.reset()
	for _, name := range names {
		_, ok := table.gone(name)
		require.False(t, ok, "%q after reset", name)
	}
}
