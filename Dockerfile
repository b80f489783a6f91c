# syntax=docker/dockerfile:1
# One static chiffon binary on a distroless base, running as a non-root user (65532).
# Agents whose work types run tools (ansible-playbook, git, go ...) need those tools:
# build an image FROM one that has them and COPY /usr/local/bin/chiffon from this one.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/usr/local/bin/chiffon ./cmd/chiffon \
 && mkdir -p /out/var/lib/chiffon /out/etc/chiffon

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/usr/local/bin/chiffon /usr/local/bin/chiffon
# Named volumes mounted here start out owned by the non-root user.
COPY --from=build --chown=65532:65532 /out/var/lib/chiffon /var/lib/chiffon
COPY --from=build /out/etc/chiffon /etc/chiffon
USER 65532:65532
EXPOSE 4222 8080
ENTRYPOINT ["/usr/local/bin/chiffon"]
CMD ["--help"]
