package person_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval/person"
)

func TestNormalizeMakesOnePersonOfOneName(t *testing.T) {
	t.Parallel()
	for _, same := range [][2]string{
		{"ana", " Ana "},
		{"ana", "ANA"},
		{"ana", "ＡＮＡ"}, // full-width (NFKC)
		{"ana maria", "Ana   Maria"},
		{"strasse", "STRASSE"},
		{"straße", "STRASSE"}, // full case folding: ß folds to ss
		{"ﬁona", "FIONA"},     // a ligature (NFKC)
		{"Åsa", "A\u030asa"},  // composed and decomposed
	} {
		require.Equal(t, person.Normalize(same[0]), person.Normalize(same[1]), "%q vs %q", same[0], same[1])
	}
	require.NotEqual(t, person.Normalize("ana"), person.Normalize("anna"))
}

func TestDirectoryNamesTheTokensPerson(t *testing.T) {
	t.Parallel()
	d, err := person.Parse(" ana-laptop = Ana , ana-script=ana ,sam-ci=Sam", []string{"ana-laptop", "ana-script", "sam-ci", "ops"})
	require.NoError(t, err)
	require.True(t, d.Same("ana-laptop", "ana-script"), "two tokens of one person")
	require.False(t, d.Same("ana-laptop", "sam-ci"))
	require.Equal(t, "ops", d.Of("ops"), "a token not listed is its own person")
	require.True(t, d.Same("ana-laptop", "ANA"), "a token named like a person is that person")
	require.True(t, d.Listed("sam-ci"))
	require.False(t, d.Listed("ops"))

	for _, bad := range []string{"ana-laptop", "ana-laptop=", "=ana", "nobody=ana", "ana-laptop=ana,ana-laptop=bob"} {
		_, err := person.Parse(bad, []string{"ana-laptop"})
		require.Error(t, err, bad)
	}
	var none *person.Directory
	require.True(t, none.Same(" Ana", "ana"))
}
