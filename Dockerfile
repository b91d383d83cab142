# Authoric server image. Not exercised in CI here (no Docker engine on the build machine);
# it follows the same steps as scripts/setup.
FROM python:3.11-slim
WORKDIR /srv/authoric
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY platform ./platform
COPY migrations ./migrations
COPY policies ./policies
RUN pip install --no-cache-dir --no-deps -e .
ENV AUTHORIC_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8000
CMD ["authoric", "serve", "--host", "0.0.0.0", "--port", "8000"]
