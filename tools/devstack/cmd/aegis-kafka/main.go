// Command aegis-kafka runs franz-go's kfake — a Kafka broker that speaks the
// real wire protocol — as its own process, with every Aegis topic created.
// It is what `make dev` and the end-to-end tests use instead of a Kafka
// cluster; stopping and restarting it with the same KAFKA_DATA_DIR keeps the
// topics, records and committed offsets, so it can play a broker outage.
//
//	KAFKA_PORT        port on 127.0.0.1 (default 9092)
//	KAFKA_PARTITIONS  partitions per topic (default 3)
//	KAFKA_DATA_DIR    persist to this directory (default: memory only)
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

func main() {
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
	opts := []kfake.Opt{
		kfake.Ports(port),
		kfake.SeedTopics(int32(partitions), kafkax.AllTopics()...),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
	}
	if dir := os.Getenv("KAFKA_DATA_DIR"); dir != "" {
		opts = append(opts, kfake.DataDir(dir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start kfake on port %d: %w", port, err)
	}
	logger.Info("kafka (kfake) listening", "addrs", c.ListenAddrs(), "partitions", partitions,
		"data_dir", os.Getenv("KAFKA_DATA_DIR"), "topics", kafkax.AllTopics())
	<-ctx.Done()
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
