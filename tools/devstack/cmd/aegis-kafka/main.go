// Command aegis-kafka runs franz-go's kfake — a Kafka broker that speaks the
// real wire protocol — as its own process, with every Aegis topic created.
// It is what `make dev` and the end-to-end tests use instead of a Kafka
// cluster; stopping and restarting it with the same KAFKA_DATA_DIR keeps the
// topics, records and committed offsets, so it can play a broker outage.
//
//	KAFKA_PORT        port on 127.0.0.1 (default 9092)
//	KAFKA_PARTITIONS  partitions per topic (default 3)
//	KAFKA_DATA_DIR    persist to this directory (default: memory only)
//	KAFKA_ADMIN_ADDR  serve a fault-injection API on this address (default: off)
//	KAFKA_MEMBER_EXPIRY  on (default) or off: expire consumer-group members
//	                  that stopped heartbeating, as Apache Kafka does. kfake
//	                  alone keeps some dead members (and their partitions)
//	                  forever; "off" is only for showing that (docs/kfake.md).
//
// The admin API lets the chaos suite inject broker errors through kfake's
// fault hooks: POST /faults {"error":"NOT_LEADER_FOR_PARTITION","request":
// "produce","count":5} fails the next 5 produce requests with that error
// (count -1: until removed); with "for":"3s" instead of a count it fails
// every such request for three seconds, the way a leader election makes a
// partition unavailable for a while rather than for a number of requests;
// DELETE /faults removes them all. GET
// /groups/{group} shows a consumer group as the coordinator sees it (state,
// generation, members with their client host and partitions), which is how
// the chaos suite and a person find a member that should not be there.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/localkafka"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(buildinfo.Get().String("aegis-kafka"))
		return
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("service", "kafka")
	if err := run(logger); err != nil {
		logger.Error("kafka stand-in failed", "error", err.Error())
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	port, err := intEnv("KAFKA_PORT", 9092)
	if err != nil {
		return err
	}
	partitions, err := intEnv("KAFKA_PARTITIONS", 3)
	if err != nil {
		return err
	}
	if partitions < 1 {
		return errors.New("KAFKA_PARTITIONS must be at least 1")
	}
	var expiryOff bool
	switch v := os.Getenv("KAFKA_MEMBER_EXPIRY"); v {
	case "", "on":
	case "off":
		expiryOff = true
	default:
		return fmt.Errorf("KAFKA_MEMBER_EXPIRY must be on or off, got %q", v)
	}
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.SeedTopics(int32(partitions), kafkax.AllTopics()...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
	}
	if dir := os.Getenv("KAFKA_DATA_DIR"); dir != "" {
		opts = append(opts, kfake.DataDir(dir))
	}
	c, err := localkafka.New(localkafka.Config{DisableMemberExpiry: expiryOff, Logger: logger}, opts...)
	if err != nil {
		return fmt.Errorf("start kfake on port %d: %w", port, err)
	}
	logger.Info("kafka (kfake) listening", "addrs", c.ListenAddrs(), "partitions", partitions,
		"data_dir", os.Getenv("KAFKA_DATA_DIR"), "topics", kafkax.AllTopics(), "member_expiry", !expiryOff)
	if expiryOff {
		logger.Warn("KAFKA_MEMBER_EXPIRY=off: consumer-group members killed mid-rebalance may keep their partitions forever")
	}
	var srv *http.Server
	if addr := os.Getenv("KAFKA_ADMIN_ADDR"); addr != "" {
		srv = &http.Server{Addr: addr, Handler: faultAPI(c.Cluster, logger), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("kafka admin API", "error", err.Error())
			}
		}()
	}
	<-ctx.Done()
	// The admin API goes first: GroupInfo would wait forever on a closed kfake.
	if srv != nil {
		_ = srv.Close()
	}
	c.Close()
	logger.Info("kafka (kfake) stopped")
	return nil
}

func intEnv(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s must be an integer, got %q", name, v)
	}
	return n, nil
}

// faultAPI serves POST/DELETE /faults over the cluster's fault hooks.
func faultAPI(c *kfake.Cluster, logger *slog.Logger) http.Handler {
	var mu sync.Mutex
	var handles []*kfake.FaultHandle
	errorsByName := map[string]*kerr.Error{
		"NOT_LEADER_FOR_PARTITION": kerr.NotLeaderForPartition,
		"LEADER_NOT_AVAILABLE":     kerr.LeaderNotAvailable,
		"REQUEST_TIMED_OUT":        kerr.RequestTimedOut,
		"NOT_ENOUGH_REPLICAS":      kerr.NotEnoughReplicas,
		"UNKNOWN_SERVER_ERROR":     kerr.UnknownServerError,
		"NOT_COORDINATOR":          kerr.NotCoordinator,
	}
	keys := map[string]kmsg.Key{"produce": kmsg.Produce, "fetch": kmsg.Fetch, "offset_commit": kmsg.OffsetCommit}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Error   string `json:"error"`
			Request string `json:"request"`
			Count   int    `json:"count"`
			For     string `json:"for"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kerrErr, ok := errorsByName[req.Error]
		key, ok2 := keys[req.Request]
		var window time.Duration
		if req.For != "" {
			d, err := time.ParseDuration(req.For)
			if err != nil || d <= 0 || req.Count != 0 {
				http.Error(w, `"for" must be a positive duration such as "3s", and not given with a count`, http.StatusBadRequest)
				return
			}
			window, req.Count = d, -1
		}
		if !ok || !ok2 || req.Count == 0 {
			http.Error(w, "want error (NOT_LEADER_FOR_PARTITION, ...), request (produce, fetch, offset_commit) and a non-zero count or a duration (for)", http.StatusBadRequest)
			return
		}
		h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: kerrErr, Count: req.Count})
		mu.Lock()
		handles = append(handles, h)
		mu.Unlock()
		if window > 0 {
			time.AfterFunc(window, func() {
				h.Remove()
				logger.Warn("fault window ended", "error", req.Error, "request", req.Request, "for", req.For)
			})
		}
		logger.Warn("fault injected", "error", req.Error, "request", req.Request, "count", req.Count, "for", req.For)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /groups/{group}", func(w http.ResponseWriter, r *http.Request) {
		g := c.GroupInfo(r.PathValue("group"))
		if g == nil {
			http.Error(w, "no such group", http.StatusNotFound)
			return
		}
		type member struct {
			MemberID   string             `json:"member_id"`
			ClientID   string             `json:"client_id"`
			ClientHost string             `json:"client_host"`
			Assignment map[string][]int32 `json:"assignment"`
		}
		out := struct {
			Group      string   `json:"group"`
			State      string   `json:"state"`
			Generation int32    `json:"generation"`
			Members    []member `json:"members"`
		}{Group: g.Group, State: g.State, Generation: g.Epoch, Members: []member{}}
		for _, m := range g.Members {
			out.Members = append(out.Members, member{m.MemberID, m.ClientID, m.ClientHost, m.Assignment})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		for _, h := range handles {
			h.Remove()
		}
		handles = nil
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
