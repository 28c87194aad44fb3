// Package batch gathers the work waiting on a queue into one group, the
// step both group commits (webhook-api's ingest.Committer, payout-worker's
// ledger.CreditCommitter) take before their one transaction. Nothing waits
// to fill a group: what is queued now goes, so an idle service commits a
// single item at once and a busy one amortises its commit over many.
package batch

// Gather returns first followed by whatever is queued now, up to max items
// in all; it never blocks.
func Gather[T any](first T, queue <-chan T, max int) []T {
	group := []T{first}
	for len(group) < max {
		select {
		case r := <-queue:
			group = append(group, r)
		default:
			return group
		}
	}
	return group
}
