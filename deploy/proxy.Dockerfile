# nginx from Debian's package in front of the replicas (compose.yaml), on the local base.
ARG BASE=authoric-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light \
    && rm -rf /var/lib/apt/lists/*
COPY nginx.conf /etc/nginx/authoric.conf
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=3s --retries=10 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080"]
CMD ["nginx", "-c", "/etc/nginx/authoric.conf", "-g", "daemon off;"]
