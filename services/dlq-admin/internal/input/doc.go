// Package input is what every dlq-admin area and surface shares about an
// operator's input: the error that names the one parameter an area cannot
// use (the API answers it 400 invalid_request with that name, so the caller
// knows what to fix) and the page sizes of every list.
//
// It imports nothing of dlq-admin, so an area can refuse a value and a
// surface can read the refusal without either importing a store.
package input
