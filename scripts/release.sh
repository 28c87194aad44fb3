#!/usr/bin/env bash
# make release VERSION=v1.2.3 (docs/operations/deploy.md, "Versions and releases").
#
# Run by the Makefile, which passes RELEASE_VERSION (empty unless VERSION was
# given), LDFLAGS (its stamping flags), COMMIT, SERVICES, RELEASE_IMAGES and GO.
# Checks first and changes nothing when one fails: a version vMAJOR.MINOR.PATCH,
# a CHANGELOG.md section for it, a clean working tree, no such tag yet. Then:
#   1. aegisctl for linux and darwin, amd64 and arm64, in bin/release/, with SHA256SUMS;
#   2. the four service images aegis/<service>:<version> (docker build), unless
#      RELEASE_IMAGES=0 or there is no Docker engine (then it says so and goes on);
#   3. the production overlay's images pinned to the version;
#   4. the git commands to run (tag, commit of the overlay). Nothing is pushed.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${RELEASE_VERSION:-}
GO=${GO:-go}
SERVICES=${SERVICES:-webhook-api outbox-relay payout-worker dlq-admin}
RELEASE_IMAGES=${RELEASE_IMAGES:-1}
OVERLAY=deploy/k8s/overlays/production
OUT=bin/release

die() {
	echo "make release: $*" >&2
	exit 1
}

[ -n "$version" ] || die "VERSION is required: make release VERSION=v1.2.3"
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
	die "VERSION must be vMAJOR.MINOR.PATCH (e.g. v1.2.3 or v1.2.3-rc.1), got \"$version\""
number=${version#v}
grep -Eq "^## \[v?${number//./\\.}\]" CHANGELOG.md ||
	die "CHANGELOG.md has no section for $version: add \"## [$number] - $(date -u +%Y-%m-%d)\" (what changed, for operators) and commit it first"
[ -z "$(git status --porcelain)" ] ||
	die "the working tree has uncommitted or untracked changes (git status): a release is built from a commit alone"
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then
	die "tag $version already exists: pick the next version"
fi
commit=$(git rev-parse HEAD)
[ "${COMMIT:-$commit}" = "$commit" ] || die "COMMIT ($COMMIT) is not HEAD ($commit)"
[ -n "${LDFLAGS:-}" ] || die "LDFLAGS is not set: run it as make release VERSION=$version"
case "$LDFLAGS" in
*"buildinfo.version=$version "*) ;;
*) die "LDFLAGS do not stamp $version: run it as make release VERSION=$version" ;;
esac

echo "release $version from $commit"

# 1. aegisctl, static, for the operators' machines.
rm -rf "$OUT"
mkdir -p "$OUT"
for os in linux darwin; do
	for arch in amd64 arm64; do
		bin="$OUT/aegisctl-$version-$os-$arch"
		echo "  build $bin"
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$bin" ./services/dlq-admin/cmd/aegisctl
	done
done
(cd "$OUT" && sha256sum aegisctl-* >SHA256SUMS)

# 2. The service images, stamped the same way by the Dockerfile.
images_built=no
image_cmds=()
for svc in $SERVICES; do
	image_cmds+=("docker build --build-arg MODULE=services/$svc --build-arg VERSION=$version --build-arg COMMIT=$commit -t aegis/$svc:$version .")
done
if [ "$RELEASE_IMAGES" = 0 ]; then
	echo "  images skipped (RELEASE_IMAGES=0)"
elif ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
	{
		echo
		echo "  !! NO DOCKER ENGINE on this machine: the service images were NOT built."
		echo "  !! Build them from this commit ($commit) on a machine with one:"
		printf '  !!   %s\n' "${image_cmds[@]}"
		echo
	} >&2
else
	for cmd in "${image_cmds[@]}"; do
		echo "  $cmd"
		$cmd
	done
	images_built=yes
fi

# 3. The production overlay runs the version: every newTag of its images block.
kustomization=$OVERLAY/kustomization.yaml
tmp=$(mktemp)
awk -v tag="$version" '
	/^images:/ { in_images = 1; print; next }
	/^[^ #-]/ { in_images = 0 }
	in_images && /^[ -]*newTag:/ { sub(/newTag:.*/, "newTag: \"" tag "\"") }
	{ print }
' "$kustomization" >"$tmp"
cat "$tmp" >"$kustomization"
rm -f "$tmp"
rendered=$(cd deploy && GOWORK=off "$GO" tool kustomize build "k8s/overlays/production")
for svc in $SERVICES; do
	grep -Eq "image: \S+/$svc:$version\$" <<<"$rendered" ||
		die "the production overlay does not render $svc at $version; check $kustomization"
done
echo "  $kustomization: every image at $version"

cat <<EOF

Release $version built from $commit (nothing pushed):
  $OUT/: aegisctl for linux and darwin (amd64, arm64), SHA256SUMS
  images aegis/<service>:$version: $([ "$images_built" = yes ] && echo built || echo "NOT built (see above)")
  $kustomization: pinned to $version (uncommitted)

Next:
  git tag -a $version $commit -m "Aegis $version"
  git commit -m "deploy: production runs $version" $kustomization
  git push origin $version    # and push the images to your registry, then the overlay commit
EOF
