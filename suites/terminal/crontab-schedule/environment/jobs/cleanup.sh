#!/bin/sh
echo cleanup
