# One image per binary, built from its own module with GOWORK=off: each
# module's go.mod requires pkg/ and migrations/ through replace directives, so
# the build does not need go.work (and cannot silently depend on it).
#
#   docker build --build-arg MODULE=services/webhook-api -t aegis/webhook-api .
#   docker build --build-arg MODULE=services/webhook-api --build-arg VERSION=v1.2.3 \
#     --build-arg COMMIT=$(git rev-parse HEAD) -t aegis/webhook-api:v1.2.3 .
#   docker build --build-arg MODULE=tools/devstack --build-arg PACKAGE=./cmd/aegis-psp -t aegis/psp .
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
ARG MODULE
ARG PACKAGE=.
WORKDIR /src
ENV GOWORK=off CGO_ENABLED=0 GOFLAGS=-trimpath
# Dependencies first, so source edits do not refetch modules.
COPY pkg/go.mod pkg/go.sum pkg/
COPY migrations/go.mod migrations/go.sum migrations/
COPY ${MODULE}/go.mod ${MODULE}/go.sum ${MODULE}/
RUN cd ${MODULE} && go mod download
COPY pkg/ pkg/
COPY migrations/ migrations/
COPY ${MODULE}/ ${MODULE}/
# The release and commit --version and aegis_build_info report (pkg/buildinfo);
# `make release` passes both. Unset, the binary says "dev" and "unknown".
ARG VERSION=
ARG COMMIT=
RUN cd ${MODULE} && go build -o /out/app \
    -ldflags="-s -w -X github.com/aegis-payments/aegis/pkg/buildinfo.version=${VERSION} -X github.com/aegis-payments/aegis/pkg/buildinfo.commit=${COMMIT}" \
    ${PACKAGE}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
USER nonroot:nonroot
ENTRYPOINT ["/app"]
