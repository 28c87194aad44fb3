package event

// MaxUserID is the longest wallet owner id (in bytes) Aegis accepts: from a
// PSP's metadata.user_id, in a payout request, in an API client's scope. It
// is the record key on Kafka and is indexed in Postgres, whose B-tree rows
// have a hard size limit; a longer id could be stored nowhere, so it is
// refused at the front door rather than failing deep inside the pipeline.
const MaxUserID = 128
