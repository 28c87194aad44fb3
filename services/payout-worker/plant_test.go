package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The planted defects are switched by the environment of a chaos build
// only: the configuration reader, which every build runs, never reads a
// plant switch, so none can appear in the configuration reference or a
// production manifest.
func TestReadConfigReadsNoPlantSwitch(t *testing.T) {
	var read []string
	_, err := readConfig(withEventKey(func(k string) string {
		read = append(read, k)
		return ""
	}))
	require.NoError(t, err)
	require.NotEmpty(t, read)
	for _, k := range read {
		require.NotContains(t, strings.ToUpper(k), "PLANT", "the configuration reader reads %s", k)
	}
}
