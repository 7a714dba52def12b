ARG BASE=python:3.11-slim
FROM ${BASE} AS build
ARG WHEELS=
COPY . /src
RUN python3 -m venv /opt/dagwright \
 && if [ -n "$WHEELS" ]; then /opt/dagwright/bin/pip install -q --no-index --find-links "/src/$WHEELS" dagwright; \
    else /opt/dagwright/bin/pip install -q --no-cache-dir /src; fi

FROM ${BASE}
COPY --from=build /opt/dagwright /opt/dagwright
RUN useradd --system --uid 10001 --create-home dagwright
USER 10001
ENV PATH=/opt/dagwright/bin:$PATH PYTHONUNBUFFERED=1
ENTRYPOINT ["dagwright"]
