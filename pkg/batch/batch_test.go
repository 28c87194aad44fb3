package batch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/batch"
)

func TestGatherTakesWhatIsQueuedUpToMax(t *testing.T) {
	q := make(chan int, 10)
	for i := 2; i <= 6; i++ {
		q <- i
	}
	require.Equal(t, []int{1, 2, 3}, batch.Gather(1, q, 3))
	require.Equal(t, []int{0, 4, 5, 6}, batch.Gather(0, q, 10), "what is left, without waiting for more")
	require.Equal(t, []int{7}, batch.Gather(7, q, 10), "an empty queue: the first alone")
}
